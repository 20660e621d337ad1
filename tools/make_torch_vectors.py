#!/usr/bin/env python3
"""Reference vectors for the model tests, made with the reference PyTorch RecNet.

usage: make_torch_vectors.py SSM_MODELS_PY OUT_DIR

SSM_MODELS_PY is the reference's models/ssm_models.py (symseqbench/selectivbench at
54609fb); it is imported, not copied. For each model (transformer, gru) this builds a
tiny RecNet after torch.manual_seed(seed) exactly as train.py does, runs one float64
forward/backward on a fixed one-hot input, and writes OUT_DIR/<model>.json with the
initial state_dict (float32 values), the logits, the loss and every parameter gradient.
The C tests compare against these files; they never run Python.

torch 1.13 (Debian 12) lacks F.scaled_dot_product_attention; a plain causal version is
installed in its place (what the reference calls with is_causal=True, dropout 0).
"""
import importlib.util
import json
import math
import sys
import types

import torch
import torch.nn.functional as F


def sdpa(q, k, v, is_causal=False, dropout_p=0.0, attn_mask=None):
    assert dropout_p == 0.0 and is_causal and attn_mask is None
    d = q.shape[-1]
    s = q @ k.transpose(-2, -1) / math.sqrt(d)
    t = s.shape[-1]
    mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
    s = s.masked_fill(mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def einops_stub():
    """The one einops call the reference's models make (S4D's kernel: repeat n -> h n)."""
    mod = types.ModuleType("einops")

    def repeat(t, pattern, **sizes):
        assert pattern == "n -> h n", pattern
        return t.unsqueeze(0).expand(sizes["h"], -1).contiguous()

    def rearrange(*a, **k):
        raise AssertionError("einops.rearrange is not used by the models compared here")

    mod.repeat = repeat
    mod.rearrange = rearrange
    return mod


def load_reference(path):
    if "wandb" not in sys.modules:
        sys.modules["wandb"] = types.ModuleType("wandb")
    if "einops" not in sys.modules:
        sys.modules["einops"] = einops_stub()
    tqdm = types.ModuleType("tqdm")
    tqdm.tqdm = lambda x=None, **k: x
    sys.modules.setdefault("tqdm", tqdm)
    F.scaled_dot_product_attention = sdpa
    spec = importlib.util.spec_from_file_location("ssm_models", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def make(mod, model, seed, inp, out, d, layers, n_head, B, T):
    torch.manual_seed(seed)
    net = mod.RecNet(model=model, inp_size=inp, d_output=out, lr=1e-3, dropout=0.2,
                     layers=layers, d_model=d, d_state=8, n_head=n_head, reg=True,
                     rope_base=1000)
    init = {k: v.detach().clone() for k, v in net.state_dict().items()}
    net = net.double()
    net.eval()  # dropout off: the comparison is deterministic
    g = torch.Generator().manual_seed(1234)
    cls = torch.randint(0, inp, (B, T), generator=g)
    x = F.one_hot(cls, inp).double()
    target = torch.randint(0, out, (B, T), generator=g)
    logits = net(x)
    loss = F.cross_entropy(logits.reshape(-1, out), target.reshape(-1))
    loss.backward()
    return {
        "model": model, "seed": seed, "inp": inp, "out": out, "d_model": d, "layers": layers,
        "n_head": n_head, "batch": B, "frames": T,
        "input_classes": cls.reshape(-1).tolist(),
        "target": target.reshape(-1).tolist(),
        "state_dict": [{"name": k, "shape": list(v.shape),
                        "values": [float(a) for a in v.reshape(-1).tolist()]}
                       for k, v in init.items()],
        "logits": [float(a) for a in logits.detach().reshape(-1).tolist()],
        "loss": float(loss),
        "grads": {k: [float(a) for a in p.grad.reshape(-1).tolist()]
                  for k, p in net.named_parameters()},
    }


def optim_vectors():
    """Adam (coupled weight decay) and AdamW (eps 1e-15) as train.py builds them, with
    clip_grad_norm_(1) before each step, over 4 steps of fixed gradients, in float32."""
    out = {}
    for kind in ("adam", "adamw"):
        p = torch.nn.Parameter(torch.tensor([0.5, -1.25, 2.0, 0.0, 3.5], dtype=torch.float32))
        if kind == "adam":
            opt = torch.optim.Adam([p], lr=0.01, weight_decay=0.01)
        else:
            opt = torch.optim.AdamW([p], lr=0.01, eps=1e-15, weight_decay=0.01)
        steps = []
        for k in range(4):
            p.grad = torch.tensor([0.3, -2.0, 0.01 * k, 5.0, -0.7], dtype=torch.float32) * (k + 1)
            norm = float(torch.nn.utils.clip_grad_norm_([p], 1.0))
            opt.step()
            steps.append({"grad_norm": norm, "param": [float(a) for a in p.detach().tolist()]})
        out[kind] = steps
    return out


def main():
    mod = load_reference(sys.argv[1])
    out_dir = sys.argv[2]
    with open(f"{out_dir}/optim.json", "w") as f:
        json.dump(optim_vectors(), f)
    for model in ("transformer", "gru"):
        data = make(mod, model, seed=3, inp=6, out=11, d=16, layers=2, n_head=4, B=2, T=7)
        with open(f"{out_dir}/{model}.json", "w") as f:
            json.dump(data, f)
        print(model, "loss", data["loss"])


if __name__ == "__main__":
    main()
