"""The binding's argument checks: every value that crosses into the library is checked here
first, with the command line's rules, so that ctypes never truncates it (1.7 -> 1, 2**70 ->
a wrapped int64, '1\\0junk' -> '1') and a bad value raises SelectivbenchError with one line
naming it. The library checks ranges again; these checks are about what ctypes would lose."""

import math
import numbers

import numpy as np

from ._lib import SelectivbenchError, key_range

THREADS_MAX = int(key_range("threads")[1])  # the key table's range of --threads (0..max)
INT64_MAX = 2 ** 63 - 1
INT_MAX = 2 ** 31 - 1


def whole(name, value, lo, hi, hint=None):
    """value as an int: a whole number (int or numpy integer; not a bool, not a float) in
    lo..hi, else SelectivbenchError naming it."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise SelectivbenchError("%s %r: give a whole number (%s)"
                                 % (name, value, hint or "%d to %d" % (lo, hi)))
    v = int(value)
    if v < lo or v > hi:
        raise SelectivbenchError("%s %d: give %s" % (name, v, hint or "%d to %d" % (lo, hi)))
    return v


def threads(value):
    """A thread count as every call takes it: 0 (every core) to THREADS_MAX."""
    return whole("threads", value, 0, THREADS_MAX, "0 (every core) to %d" % THREADS_MAX)


def real(name, value, allow_none=True):
    """value as a float: a real number (not a bool, not text); None -> NaN (unknown) where
    allowed. Ranges are the library's to check (sb_results_record_external)."""
    if value is None and allow_none:
        return float("nan")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise SelectivbenchError("%s %r: give a number" % (name, value))
    v = float(value)
    if math.isnan(v):
        raise SelectivbenchError("%s is NaN: give a number, or None (or leave it out) when it "
                                 "is not known" % name)
    return v


def text(name, value):
    """value as bytes for a C string: text without NUL bytes (C would stop at the first)."""
    if not isinstance(value, str):
        raise SelectivbenchError("%s %r: give text" % (name, value))
    if "\0" in value:
        raise SelectivbenchError("%s %r contains a NUL byte: C would read only %r"
                                 % (name, value, value.split("\0")[0]))
    return value.encode()


def indices(values):
    """Sample indices as a contiguous int64 array: whole numbers only (a float index is an
    error, not truncated), each within int64, at most INT_MAX of them."""
    arr = values if isinstance(values, np.ndarray) else np.array(list(values))
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.ndim != 1:
        raise SelectivbenchError("indices: give a flat sequence of sample indices (got shape %s)"
                                 % (arr.shape,))
    if arr.dtype.kind == "O":  # Python ints beyond int64, or mixed objects
        for v in arr:
            whole("index", v, -INT64_MAX - 1, INT64_MAX, "a sample index")
        arr = arr.astype(np.int64)
    elif arr.dtype.kind == "u":
        if int(arr.max()) > INT64_MAX:
            raise SelectivbenchError("index %d: give a sample index" % int(arr.max()))
    elif arr.dtype.kind != "i":
        raise SelectivbenchError("indices of type %s: give whole numbers (sample indices), "
                                 "not %s" % (arr.dtype, arr.dtype.kind == "b" and "booleans"
                                             or "fractions or text"))
    if arr.size > INT_MAX:
        raise SelectivbenchError("%d indices: give at most %d per batch" % (arr.size, INT_MAX))
    return np.ascontiguousarray(arr, dtype=np.int64)
