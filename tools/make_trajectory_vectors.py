#!/usr/bin/env python3
"""Reference training trajectories for tests/unit/test_trajectory.c (as llm.c's test_gpt2).

usage: make_trajectory_vectors.py SSM_MODELS_PY TRAJECTORY_DIR

SSM_MODELS_PY is the reference's models/ssm_models.py (symseqbench/selectivbench at
54609fb); it is imported, not copied (through make_torch_vectors.load_reference).
TRAJECTORY_DIR is tests/data/torch/trajectory. Its batches.json was written by the C side
(`build/tests/test_trajectory --write-batches batches.json`): the run's settings and the
10 training batches the C task generator makes (per frame the one-hot input class or -1
for a zero gap frame, the target state id, the padding mask).

For each optimiser of train.py (adam, adamw) this builds the RecNet after
torch.manual_seed(seed) as train.py does (the C side's initialisation is bit-identical),
and runs train.py's update loop in float32 for the 10 batches:
    loss = F.cross_entropy(logits[mask], target[mask])   (utils.seq_classification_loss)
    loss.backward(); clip_grad_norm_(parameters, 1); optimizer.step(); zero_grad();
    scheduler.step()
with torch.optim.Adam(lr, weight_decay=wd) or AdamW(lr, eps=1e-15, weight_decay=wd) and
LambdaLR with train.py's cosine_schedule_with_warmup. It writes TRAJECTORY_DIR/<opt>.json:
per update the loss (before the update), the learning rate used and the gradient norm
before clipping, and every state_dict tensor after the last update (float32 values).
The C test never runs Python.
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_torch_vectors import load_reference  # noqa: E402


def f32(x):
    """A float32 value as the shortest decimal that reads back to it (9 digits suffice)."""
    return float("%.9g" % x)


def batch_tensors(b, n_inputs):
    B, T = b["B"], b["T"]
    cls = torch.tensor(b["input_class"]).reshape(B, T)
    x = torch.zeros(B, T, n_inputs, dtype=torch.float32)
    frames = cls >= 0
    x[frames] = F.one_hot(cls[frames], n_inputs).float()
    target = torch.tensor(b["target"]).reshape(B, T)
    mask = torch.tensor(b["valid"]).reshape(B, T).bool()
    return x, target, mask


def run(mod, cfg, optimizer_name):
    torch.manual_seed(cfg["seed"])
    net = mod.RecNet(model=cfg["model"], inp_size=cfg["inp"], d_output=cfg["out"], lr=cfg["lr"],
                     dropout=cfg["dropout"], layers=cfg["layers"], d_model=cfg["d_model"],
                     d_state=cfg["d_state"], n_head=cfg["n_head"], reg=True,
                     rope_base=cfg["rope_base"])
    net.train()  # train.py's state during the first epoch (dropout is 0 here anyway)
    lr, wd = cfg["lr"], cfg["wd"]
    if optimizer_name == "adam":
        opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=wd)
    else:
        opt = torch.optim.AdamW(net.parameters(), lr=lr, eps=1e-15, weight_decay=wd)
    warmup, total = cfg["warmup_steps"], cfg["schedule_total"]

    def lr_lambda(step):  # train.py's cosine_schedule_with_warmup
        if step < warmup:
            return step / warmup
        return float(0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup))))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    steps = []
    opt.zero_grad()
    for b in cfg["batches"]:
        x, target, mask = batch_tensors(b, cfg["inp"])
        logits = net(x)
        loss = F.cross_entropy(logits[mask], target[mask])
        loss.backward()
        norm = float(torch.nn.utils.clip_grad_norm_(net.parameters(), 1))
        used_lr = opt.param_groups[0]["lr"]
        opt.step()
        opt.zero_grad()
        sched.step()
        steps.append({"loss": float(loss), "lr": used_lr, "grad_norm": norm})
    return {
        "optimizer": optimizer_name, "model": cfg["model"], "seed": cfg["seed"], "lr": lr,
        "wd": wd, "warmup_steps": warmup, "schedule_total": total, "dtype": "float32",
        "steps": steps,
        "final_state_dict": [{"name": k, "shape": list(v.shape),
                              "values": [f32(a) for a in v.reshape(-1).tolist()]}
                             for k, v in net.state_dict().items()],
    }


def main():
    mod = load_reference(sys.argv[1])
    out_dir = sys.argv[2]
    with open(f"{out_dir}/batches.json") as f:
        cfg = json.load(f)
    assert cfg["format"] == "selectivbench-trajectory-batches-1"
    torch.set_num_threads(1)
    for name in ("adam", "adamw"):
        data = run(mod, cfg, name)
        with open(f"{out_dir}/{name}.json", "w") as f:
            json.dump(data, f)
        print(name, " ".join("%.6f/%.3g" % (s["loss"], s["grad_norm"]) for s in data["steps"]))


if __name__ == "__main__":
    main()
