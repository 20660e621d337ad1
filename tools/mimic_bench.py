#!/usr/bin/env python3
"""Training speed of a model's PyTorch mimic (tests/data/models/<model>/mimic.py, issue 20):
the reference form `selectivbench bench` is compared with for the models beyond the reference.

usage: mimic_bench.py MIMIC_PY [--steps N] [--threads N]

Builds the mimic's RecNet at the large configuration of tools/torch_bench.py (B16 T400 d128
L4, 41 one-hot inputs, 1601 classes, heads as get_num_heads(128, 128)) and times training
steps as train.py takes them: forward, cross-entropy, backward, clip_grad_norm_(1), AdamW.
Prints one JSON line: {"model", "tokens_per_s" (median step), "step_s"}. The mimics are the
plain step-by-step forms the tests check against (fla's naive/recurrent forms or the paper's
equations), not tuned kernels. A cross-check tool only: the C tests never run it.
"""
import importlib.util
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_checkpoint_with_torch import heads  # noqa: E402

B, T, D, L, I, C = 16, 400, 128, 4, 41, 1601


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit("usage: mimic_bench.py MIMIC_PY [--steps N] [--threads N]")
    path, steps, threads = args[0], 3, 2
    if "--steps" in args:
        steps = int(args[args.index("--steps") + 1])
    if "--threads" in args:
        threads = int(args[args.index("--threads") + 1])
    torch.set_num_threads(threads)
    spec = importlib.util.spec_from_file_location("mimic", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = os.path.basename(os.path.dirname(os.path.abspath(path)))
    torch.manual_seed(0)
    try:
        net = mod.RecNet(I, D, C, L, heads(D))
    except TypeError:  # log_linear_mamba2 also takes d_state
        net = mod.RecNet(I, D, C, L, heads(D), 128)
    net.train()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    x = F.one_hot(torch.randint(0, I, (B, T)), I).float()
    target = torch.randint(0, C, (B, T))
    times = []
    for k in range(steps + 1):  # the first is the warm-up
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(net(x).reshape(-1, C), target.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        if k > 0:
            times.append(time.perf_counter() - t0)
    step = statistics.median(times)
    print(json.dumps({"model": model, "tokens_per_s": B * T / step, "step_s": step}))


if __name__ == "__main__":
    main()
