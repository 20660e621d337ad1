#!/usr/bin/env python3
"""Batches through the Python binding against the same batches in C, in one process.

    PYTHONPATH=python python3 bench/python_batches.py [--samples 10000] [--threads 2]

The paper's task-2 configuration (vocab 41, amb 40, depth 40, 200 elements, gaps of
0.1-0.5 s, noise 0.1), one pass over --samples training samples in batches of 64: C is
`selectivbench bench data`'s "batches" stage (sb_bench_data_stage, the median of 3 passes),
Python is Task.batches over the same split (numpy arrays, targets as int64), the two
interleaved for --rounds rounds; prints the medians and their ratio (issue 19: at most 1.10).
"""

import argparse
import ctypes
import statistics
import time

import selectivbench as sb
from selectivbench import _lib


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=10000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    task = sb.Task(vocab=41, amb=40, amb_depth=40, train_seqlen_max=200, test_seqlen_max=200,
                   train_gap_min=0.1, train_gap_max=0.5, train_noise=0.1,
                   dataset_size=args.samples)
    c_times, py_times = [], []
    for _ in range(args.rounds):  # interleaved, so both meet the same machine
        seconds, err = ctypes.c_double(), _lib.Error()
        _lib.check(_lib.lib.sb_bench_data_stage(task._handle, 2, args.threads,
                                                ctypes.byref(seconds), ctypes.byref(err)), err)
        c_times.append(seconds.value)
        t0 = time.perf_counter()
        frames = 0
        for b in task.batches("train", batch_size=64, threads=args.threads):
            frames += int(b.lengths.sum())
        py_times.append(time.perf_counter() - t0)
    c, py = statistics.median(c_times), statistics.median(py_times)
    print("paper task 2, %d samples, B 64, %d thread%s, median of %d rounds: C %.3f s, "
          "Python %.3f s, ratio %.3f (%d frames)" % (args.samples, args.threads,
                                                    "" if args.threads == 1 else "s",
                                                    args.rounds, c, py, py / c, frames))


if __name__ == "__main__":
    main()
