#!/usr/bin/env python3
"""Bring your own model: a PyTorch LSTM trained on a selectivbench task through the Python
binding, recorded in a results database beside a native selectivbench GRU on the same task,
and drawn next to it by the report (docs/python.md walks through this file).

    PYTHONPATH=python python3 examples/torch_model.py --out lstm_demo
    selectivbench results lstm_demo          # both runs, with ceiling and effective memory
    ls lstm_demo/report/                     # the figures and report.md

It trains as selectivbench trains (one pass over the training set in index order, Adam with
warm-up and cosine decay, clipping at 1.0, evaluation every --epoch_size samples) and uses
the task's own loss and element accuracy (selectivbench.torch), so its accuracy reads on the
same scale as every native run's. Exits 1 if the LSTM does not beat the window-1 observer
(an observer that sees only the current and the previous element).
"""

import argparse
import math
import os
import sys
import time

import torch

import selectivbench as sb
from selectivbench.torch import TaskDataset, element_scores, loss


class LSTMModel(torch.nn.Module):
    """Embedding of the one-hot frames, an LSTM, a linear readout per frame."""

    def __init__(self, inputs, classes, width, layers):
        super().__init__()
        self.encoder = torch.nn.Linear(inputs, width)
        self.lstm = torch.nn.LSTM(width, width, num_layers=layers, batch_first=True)
        self.decoder = torch.nn.Linear(width, classes)

    def forward(self, x):
        h, _ = self.lstm(self.encoder(x))
        return self.decoder(h)


def evaluate(model, task, batch_size):
    """Test loss (mean over frames) and element accuracy over the whole test split."""
    model.eval()
    right = elements = 0
    loss_sum = frames = 0.0
    with torch.no_grad():
        for b in TaskDataset(task, "test", batch_size=batch_size):
            logits = model(b["inputs"])
            n = b["valid"].sum().item()
            loss_sum += loss(logits, b).item() * n
            frames += n
            r, real = element_scores(logits, b)
            right += r.sum().item()
            elements += real.sum().item()
    model.train()
    return loss_sum / frames, right / elements


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="lstm_demo", help="results folder (default lstm_demo)")
    ap.add_argument("--dataset_size", type=int, default=6000)
    ap.add_argument("--epoch_size", type=int, default=2000)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--batch_size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no_native", action="store_true",
                    help="skip training the native GRU beside it")
    args = ap.parse_args()

    # the tiny task of the learning check (configs/checks/learning.yaml), smaller
    task_flags = dict(vocab=9, amb=8, grammar_scale=True, train_seqlen_max=50,
                      test_seqlen_max=50, dataset_size=args.dataset_size, test_size=500,
                      seed=args.seed)
    train_flags = dict(feat_size=args.width, layers=args.layers, batch_size=args.batch_size,
                       lr=args.lr, epoch_size=args.epoch_size, dropout=0.0)
    task = sb.Task(**task_flags)
    observer = task.ceiling(samples=500)
    print("task: %d inputs, %d states, %d training samples; ideal observer %.3f, "
          "window-1 observer %.3f" % (task.inputs, task.classes, task.train_size,
                                      observer["expected_acc"], observer["window_acc"]["1"]))

    torch.manual_seed(args.seed)
    model = LSTMModel(task.inputs, task.classes, args.width, args.layers)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    updates = task.train_size // args.batch_size
    warmup = max(1, updates // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: s / warmup if s < warmup else
        0.5 * (1 + math.cos(math.pi * (s - warmup) / max(1, updates - warmup))))
    curve, start, tokens, step = [], time.time(), 0, 0
    since_eval = []
    for b in TaskDataset(task, "train", batch_size=args.batch_size, drop_last=True):
        logits = model(b["inputs"])
        l = loss(logits, b)
        opt.zero_grad()
        l.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        step += 1
        tokens += b["valid"].sum().item()
        r, real = element_scores(logits, b)
        since_eval.append((l.item(), r.sum().item() / real.sum().item()))
        if (step * args.batch_size) % args.epoch_size < args.batch_size or step == updates:
            test_loss, test_acc = evaluate(model, task, 100)
            wall = time.time() - start
            common = dict(step=step, samples=step * args.batch_size,
                          lr=sched.get_last_lr()[0], tokens_per_s=tokens / wall, wall_s=wall)
            train_loss = sum(x for x, _ in since_eval) / len(since_eval)
            train_acc = sum(y for _, y in since_eval) / len(since_eval)
            since_eval = []
            curve.append(dict(split="test", loss=test_loss, acc=test_acc, **common))
            curve.append(dict(split="train", loss=train_loss, acc=train_acc, **common))
            print("step %d/%d  train loss %.3f  test loss %.3f  test acc %.3f  %.0f tok/s"
                  % (step, updates, train_loss, test_loss, test_acc, tokens / wall), flush=True)

    last_test = [p for p in curve if p["split"] == "test"][-1]
    last_train = [p for p in curve if p["split"] == "train"][-1]
    config = dict(model="torch_lstm", **task_flags, **train_flags)
    try:
        run = sb.record_run(args.out, config,
                            dict(test_acc=last_test["acc"], test_loss=last_test["loss"],
                                 train_acc=last_train["acc"], train_loss=last_train["loss"],
                                 params=params, state_size=2 * args.width * args.layers,
                                 wall_s=time.time() - start,
                                 tokens_per_s=last_test["tokens_per_s"]),
                            curve, code_version="torch %s, examples/torch_model.py"
                            % torch.__version__)
        print("recorded run %s (torch_lstm, %d parameters) in %s" % (run, params, args.out))
    except sb.SelectivbenchError as e:
        print("not recorded: %s" % e.message)  # e.g. already recorded by an earlier run
    if not args.no_native:
        native = sb.train(dict(model="gru", **task_flags, **train_flags), results=args.out)
        print("native gru: test acc %.3f (run %s%s)" % (native["test_acc"], native["hash"],
                                                        ", cached" if native["cached"] else ""))
    rep = sb.report(args.out, os.path.join(args.out, "report"))
    print("report: %s (%d runs)" % (rep["report"], rep["runs_used"]))
    for row in sb.results(args.out, frame=False):
        print("  %-12s %s  test_acc %.3f  ceiling %.3f  effective memory %s" % (
            row["model"], row["hash"], row["test_acc"], row["ceiling"],
            row["effective_memory"]))
    if last_test["acc"] <= observer["window_acc"]["1"]:
        print("error: the LSTM's %.3f does not beat the window-1 observer's %.3f"
              % (last_test["acc"], observer["window_acc"]["1"]), file=sys.stderr)
        return 1
    print("the LSTM's %.3f beats the window-1 observer's %.3f" % (
        last_test["acc"], observer["window_acc"]["1"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
