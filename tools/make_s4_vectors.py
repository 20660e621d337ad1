#!/usr/bin/env python3
"""Reference vectors for the S4D tests, made with the reference PyTorch modules.

usage: make_s4_vectors.py SSM_MODELS_PY OUT_DIR

SSM_MODELS_PY is the reference's models/ssm_models.py (symseqbench/selectivbench at
54609fb); it is imported, not copied (tools/make_torch_vectors.py's loader, with a
minimal einops.repeat for the one pattern S4DKernel uses). Writes into OUT_DIR:

- recnet.json: tiny RecNets with S4D layers built after torch.manual_seed(seed) exactly as
  train.py builds them (lr=1e-3 -> kernel lr min(0.001, lr)). For each: the initial
  state_dict (float32 values); for the first one also one float64 forward/backward in eval
  mode on a fixed one-hot batch: logits, loss and every parameter gradient. The sizes cover
  the three ways torch.randn draws (16 values exactly, more than 16 with a recomputed tail,
  fewer than 16 on the scalar path).
- init.json: bigger RecNets (the widths of the tiny task and of the sweeps), per parameter
  the FNV-1a 64 hash of its float32 bytes, so the C init can be compared bit for bit
  without storing the values.
- optim.json: train.py's S4 optimiser (setup_optimizer: AdamW(lr, weight_decay=1e-4) for
  the general parameters, a second group {lr: min(0.001, lr), weight_decay: 0} for the
  parameters carrying _optim, CosineAnnealingLR(T_max = dataset_size // 5000) stepped
  after every evaluation) driven the way train.py's loop drives it: clip_grad_norm_(1),
  step, and a scheduler step every eval_every updates. The setup is restated here from
  train.py (importing train.py would pull in wandb and the data pipeline).
The C tests never run Python.
"""
import json
import math
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import make_torch_vectors as mtv  # noqa: E402


def build(mod, seed, inp, out, d, n_state, layers, dropout=0.2, lr=1e-3):
    torch.manual_seed(seed)
    return mod.RecNet(model="s4", inp_size=inp, d_output=out, lr=lr, dropout=dropout,
                      layers=layers, d_model=d, d_state=n_state, n_head=4, reg=True,
                      rope_base=1000)


def state_dict_values(net):
    return [{"name": k, "shape": list(v.shape),
             "values": [float(a) for a in v.reshape(-1).tolist()]}
            for k, v in net.state_dict().items()]


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & 0xffffffffffffffff
    return h


def recnet_vectors(mod):
    cases = []
    # (seed, inp, out, d, N, layers, batch, frames)
    for seed, inp, out, d, n, layers, B, T in [(3, 6, 11, 16, 8, 2, 3, 13),
                                                (5, 7, 9, 20, 6, 2, 0, 0),
                                                (7, 5, 4, 8, 2, 2, 0, 0)]:
        net = build(mod, seed, inp, out, d, n, layers)
        case = {"seed": seed, "inp": inp, "out": out, "d_model": d, "d_state": n,
                "layers": layers, "state_dict": state_dict_values(net)}
        if B > 0:
            net = net.double()
            net.eval()  # dropout off: the comparison is deterministic
            g = torch.Generator().manual_seed(1234)
            cls = torch.randint(0, inp, (B, T), generator=g)
            x = F.one_hot(cls, inp).double()
            target = torch.randint(0, out, (B, T), generator=g)
            logits = net(x)
            loss = F.cross_entropy(logits.reshape(-1, out), target.reshape(-1))
            loss.backward()
            case.update({
                "batch": B, "frames": T,
                "input_classes": cls.reshape(-1).tolist(),
                "target": target.reshape(-1).tolist(),
                "logits": [float(a) for a in logits.detach().reshape(-1).tolist()],
                "loss": float(loss),
                "grads": {k: [float(a) for a in p.grad.reshape(-1).tolist()]
                          for k, p in net.named_parameters()},
            })
            print("recnet s4 loss", float(loss))
        cases.append(case)
    return cases


def init_vectors(mod):
    cases = []
    for seed, inp, out, d, n, layers in [(1, 9, 17, 64, 64, 2), (2, 41, 1601, 128, 128, 2),
                                         (4, 41, 1601, 256, 128, 1)]:
        net = build(mod, seed, inp, out, d, n, layers)
        params = []
        for k, v in net.state_dict().items():
            params.append({"name": k, "size": v.numel(),
                           "fnv1a64": str(fnv1a64(v.contiguous().numpy().tobytes()))})
        cases.append({"seed": seed, "inp": inp, "out": out, "d_model": d, "d_state": n,
                      "layers": layers, "params": params})
    return cases


def setup_optimizer(params_general, params_kernel, lr, weight_decay, epochs):
    """train.py's setup_optimizer for one _optim group {weight_decay: 0, lr: min(0.001, lr)}"""
    opt = torch.optim.AdamW(params_general, lr=lr, weight_decay=weight_decay)
    opt.add_param_group({"params": params_kernel, "weight_decay": 0.0, "lr": min(0.001, lr)})
    return opt, torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)


def optim_vectors():
    out = {"cases": []}
    for lr, epochs, eval_every, updates in [(2e-3, 3, 2, 11), (5e-4, 4, 3, 14)]:
        pg = torch.nn.Parameter(torch.tensor([0.5, -1.25, 2.0, 0.0, 3.5], dtype=torch.float32))
        pk = torch.nn.Parameter(torch.tensor([-0.7, 0.25, 1.5], dtype=torch.float32))
        opt, sched = setup_optimizer([pg], [pk], lr, 0.0001, epochs)
        steps = []
        for k in range(updates):
            pg.grad = torch.tensor([0.3, -2.0, 0.01 * k, 5.0, -0.7], dtype=torch.float32) * (k + 1)
            pk.grad = torch.tensor([0.05 * k - 0.2, 1.0, -0.4], dtype=torch.float32)
            norm = float(torch.nn.utils.clip_grad_norm_([pg, pk], 1.0))
            lrs = [g["lr"] for g in opt.param_groups]
            opt.step()
            steps.append({"grad_norm": norm, "lr": lrs,
                          "general": [float(a) for a in pg.detach().tolist()],
                          "kernel": [float(a) for a in pk.detach().tolist()]})
            if (k + 1) % eval_every == 0:
                sched.step()
        out["cases"].append({"lr": lr, "epochs": epochs, "eval_every": eval_every,
                             "steps": steps})
    # the learning rates the trainer must use in tests/unit/test_s4.c's tiny run:
    # dataset 192, batch 16, epoch_size 64 -> an evaluation every 4 updates, T_max 3
    p = torch.nn.Parameter(torch.zeros(1))
    q = torch.nn.Parameter(torch.zeros(1))
    opt, sched = setup_optimizer([p], [q], 3e-3, 0.0001, 192 // 64)
    lrs = []
    for k in range(192 // 16):
        lrs.append([g["lr"] for g in opt.param_groups])
        opt.step()  # no gradients: nothing moves, but the order of calls is train.py's
        if (k + 1) % (64 // 16) == 0:
            sched.step()
    out["trainer"] = {"lr": 3e-3, "dataset_size": 192, "batch_size": 16, "epoch_size": 64,
                      "lrs": lrs}
    return out


def main():
    mod = mtv.load_reference(sys.argv[1])  # with its einops stand-in for S4D's repeat
    out_dir = sys.argv[2]
    with open(f"{out_dir}/recnet.json", "w") as f:
        json.dump(recnet_vectors(mod), f)
    with open(f"{out_dir}/init.json", "w") as f:
        json.dump(init_vectors(mod), f, indent=1)
    with open(f"{out_dir}/optim.json", "w") as f:
        json.dump(optim_vectors(), f, indent=1)


if __name__ == "__main__":
    main()
