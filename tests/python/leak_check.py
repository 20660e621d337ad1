"""The library leaks nothing over repeated calls through the binding: run by
tests/cli/test_python.sh under the sanitized build (./run.sh asan) with the ASan runtime
preloaded. It makes hundreds of batches (fresh and refilled from the pool), grammars,
ceilings, failing calls, recorded runs, result reads and a short training, frees every
object, and asks LeakSanitizer for a leak check while the interpreter is still alive (its
own heap is then reachable, so what is reported is a leak). Exits 1 on a leak, 0 without,
77 when the sanitizer runtime is not loaded."""

import ctypes
import gc
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import selectivbench as sb  # noqa: E402
from test_binding import TASKS  # noqa: E402


def exercise(tmp):
    for name, flags in TASKS.items():
        task = sb.Task(**flags)
        for k in range(60):
            b = task.batch("train" if k % 2 else "test", range(k % 7, k % 7 + 1 + k % 9))
            del b
        kept = [task.batch("train", [i]) for i in range(6)]  # more than the pool holds
        del kept
        orphan = task.batch("test", [0, 1])  # a batch that outlives its task's name
        del task
        del orphan
        task = sb.Task(**flags)
        for b in task.batches("test", batch_size=16):
            pass
        task.grammar()
        task.ceiling(samples=20, threads=1)
        for bad in ([0, 10 ** 6], []):
            try:
                task.batch("train", bad)
            except sb.SelectivbenchError:
                pass
        del task
    for bad in (dict(nosuch=1), dict(amb=60), dict(amb="x")):
        try:
            sb.Task(**bad)
        except sb.SelectivbenchError:
            pass
    config = dict(model="torch_lstm", **TASKS["task1"])
    run = sb.record_run(tmp, config, dict(test_acc=0.5, params=10),
                        [dict(step=1, samples=64, split="test", loss=1.0, acc=0.5)])
    try:
        sb.record_run(tmp, config, dict(test_acc=0.5))
    except sb.SelectivbenchError:
        pass
    for _ in range(5):
        sb.results(tmp, frame=False)
        sb.curve(tmp, run)
    out = sb.train(dict(model="gru", feat_size=8, layers=1, batch_size=16, epoch_size=100,
                        **TASKS["task1"]), results=tmp, threads=1)
    sb.evaluate(out["checkpoint"], threads=1)
    sb.report(tmp, os.path.join(tmp, "report"))


def library_leaks(report):
    """The leaks of an LSan report with a frame of the library (its functions are sb_*)."""
    leaks, block = [], []
    for line in report.splitlines() + [""]:
        if line.startswith(("Direct leak", "Indirect leak")) or not line.strip():
            if any(re.search(r" in sb_\w+ ", frame) for frame in block):
                leaks.append("\n".join(block))
            block = [line] if line.strip() else []
        elif block:
            block.append(line)
    return leaks


def main():
    process = ctypes.CDLL(None)
    try:
        check = process.__lsan_do_recoverable_leak_check
    except AttributeError:
        print("skipped: the leak check needs the sanitized build (./run.sh asan)")
        os._exit(77)
    tmp = tempfile.mkdtemp(prefix="sb_leaks_")
    try:
        exercise(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    gc.collect()
    # The interpreter's own objects read as leaked to LSan (CPython 3.11 points at them past
    # a header), so the report goes to a file and only leaks with a frame of the library
    # count (LSAN_OPTIONS log_path, set by test_python.sh).
    check()
    log = os.environ.get("SB_LSAN_LOG", "")
    report = ""
    for name in os.listdir(os.path.dirname(log) or "."):
        path = os.path.join(os.path.dirname(log) or ".", name)
        if name.startswith(os.path.basename(log)):
            with open(path, errors="replace") as f:
                report += f.read()
    if not log or "AddressSanitizer" not in report and "LeakSanitizer" not in report:
        print("leak check: no LSan report found at %s* (set SB_LSAN_LOG and log_path)" % log)
        os._exit(1)
    leaks = library_leaks(report)
    for leak in leaks:
        print(leak + "\n")
    print("leak check: %d leak%s with a frame of the library" % (len(leaks),
                                                               "" if len(leaks) == 1 else "s"),
          flush=True)
    # _exit: the interpreter's own heap at exit is not the library's (and is never freed)
    os._exit(1 if leaks else 0)


if __name__ == "__main__":
    main()
