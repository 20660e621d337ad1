"""selectivbench: the SelectivBench tasks, models, results and figures from Python.

A thin binding over the C library's public API (include/selectivbench/selectivbench.h,
libselectivbench.so) with ctypes and numpy; see docs/python.md.

    import selectivbench as sb
    task = sb.Task(amb=6, grammar_scale=True, train_seqlen_max=50, dataset_size=6000)
    for batch in task.batches("train", batch_size=32):
        ...  # batch.inputs [B, T, V] float32, batch.targets [B, T] int64, ...
    sb.record_run("results", {"model": "torch_lstm", **task.flags}, {"test_acc": 0.8, ...})
    sb.results("results")

`selectivbench.torch` (imported on its own, needs torch) has a Dataset and the task's loss
and element accuracy.
"""

try:
    import numpy as _numpy  # noqa: F401  (batches are numpy arrays)
except ImportError as _missing:
    raise ImportError(
        "selectivbench needs numpy: install it (Debian: sudo apt-get install python3-numpy; "
        "pip: pip install numpy) for the python3 that imports selectivbench") from _missing

from ._lib import SelectivbenchError, lib as _lib_handle
from ._config import defaults
from .task import Batch, Task
from .runs import curve, evaluate, record_run, report, results, train

__version__ = "0.1.0"


def library_version():
    """The version of the C library loaded ("MAJOR.MINOR.PATCH")."""
    return _lib_handle.sb_version().decode()


__all__ = ["Batch", "SelectivbenchError", "Task", "curve", "defaults", "evaluate",
           "library_version", "record_run", "report", "results", "train"]
