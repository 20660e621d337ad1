"""Tasks: the grammar and the sample generators of a configuration, at C speed.

    >>> import selectivbench as sb
    >>> task = sb.Task(amb=4, grammar_scale=True, train_seqlen_max=20, dataset_size=600)
    >>> batch = task.batch("train", range(16))
    >>> batch.inputs.shape, batch.targets.dtype
    ((16, 20, 5), dtype('int64'))
"""

import ctypes
import json

import numpy as np

from . import _check, _lib
from ._config import Config
from ._lib import lib, check

SPLITS = {"train": 0, "test": 1, "valid": 2}


def split_id(split):
    if isinstance(split, str):
        if split not in SPLITS:
            raise _lib.SelectivbenchError("unknown split '%s': use 'train', 'test' or 'valid'"
                                          % split)
        return SPLITS[split]
    if not isinstance(split, bool) and isinstance(split, int) and split in (0, 1, 2):
        return split
    raise _lib.SelectivbenchError("unknown split %r: use 'train', 'test' or 'valid'" % (split,))


def split_name(split):
    """'train', 'test' or 'valid' for a split id (0, 1, 2)."""
    return ("train", "test", "valid")[split]


class _BatchMemory:
    """Owns one sb_task_batch; the numpy views of its arrays keep it alive. When the last
    view is gone its storage goes back to its task's pool, so a loop over a split refills
    memory already mapped instead of mapping fresh pages for every batch."""

    def __init__(self, handle, task):
        # the task, not only its pool: a batch that outlives every other reference to its
        # task keeps it (and so the pool its storage returns to) alive
        self.handle, self.task = handle, task

    def __del__(self):
        if self.handle:
            # a task already freed (or being freed) takes no storage back: free it here
            if self.task._handle and len(self.task._pool) < Task.POOL_SIZE:
                self.task._pool.append(self.handle)
            else:
                lib.sb_task_batch_free(self.handle)
            self.handle = None


def _view(owner, pointer, ctype, shape, dtype):
    """A numpy array over the C values at pointer, keeping owner alive (no copy)."""
    n = 1
    for d in shape:
        n *= d
    if n == 0:
        return np.zeros(shape, dtype=dtype)
    buf = (ctype * n).from_address(ctypes.addressof(pointer.contents))
    buf._owner = owner
    return np.frombuffer(buf, dtype=dtype).reshape(shape)


class Batch:
    """B samples of a split padded to the longest, exactly as the C trainer sees them.

    inputs        float32 [B, T, V]  one-hot frames (plus gap frames and noise); 0 on padding
    targets       int64   [B, T]     the state id to predict at every frame; 0 on padding
    valid         bool    [B, T]     True on a sample's frames
    window_start  int64   [B, E]     first frame of each element's accuracy window
    window_len    int64   [B, E]     frames of that window (its symbol frame and its gap);
                                     0 on padding elements
    lengths       int64   [B]        frames of each sample
    elements      int64   [B]        elements of each sample
    indices       int64   [B]        the samples' indices in their split

    The loss is the cross entropy over valid frames; an element is right when the argmax of
    its window's summed softmax probabilities is its state (selectivbench.torch has both).
    `inputs` and `valid` lie in the library's memory (no copy; read-only views that keep it
    alive); the int64 arrays are numpy copies.
    """

    def __init__(self, memory, shape, arrays, indices):
        B, T, E, V = shape.batch, shape.frames, shape.elements, shape.inputs
        self.inputs = _view(memory, arrays.inputs, ctypes.c_float, (B, T, V), np.float32)
        self.targets = _view(memory, arrays.targets, ctypes.c_int32, (B, T),
                             np.int32).astype(np.int64)
        # 0/1 bytes: read as bool where they lie
        self.valid = _view(memory, arrays.valid, ctypes.c_uint8, (B, T), np.uint8).view(np.bool_)
        self.window_start = _view(memory, arrays.window_start, ctypes.c_int32, (B, E),
                                  np.int32).astype(np.int64)
        self.window_len = _view(memory, arrays.window_len, ctypes.c_int32, (B, E),
                                np.int32).astype(np.int64)
        self.lengths = _view(memory, arrays.frames, ctypes.c_int32, (B,),
                             np.int32).astype(np.int64)
        self.indices = indices

    @property
    def elements(self):
        """int64 [B]: elements of each sample."""
        return np.count_nonzero(self.window_len, axis=1).astype(np.int64)

    @property
    def frames(self):
        """The inputs (the issue's and the CLI's name for them)."""
        return self.inputs

    @property
    def element_targets(self):
        """int64 [B, E]: each element's state id (the target at its window's first frame);
        0 on padding elements."""
        rows = np.arange(self.targets.shape[0])[:, None]
        return np.where(self.window_len > 0, self.targets[rows, self.window_start], 0)

    def __len__(self):
        return self.inputs.shape[0]

    def __repr__(self):
        B, T, V = self.inputs.shape
        return "Batch(B=%d, T=%d, E=%d, V=%d)" % (B, T, self.window_len.shape[1], V)


class Task:
    """The task of a configuration: Task(**flags) with the command line's flag names and
    defaults (`selectivbench data --help`), e.g. Task(amb=14, grammar_scale=True,
    train_seqlen_max=50, dataset_size=6000). Training keys (model, lr, ...) are accepted
    and kept in `config` but do not change the task. Raises SelectivbenchError with the
    library's message for an unknown flag, a bad value or a grammar that cannot exist."""

    POOL_SIZE = 4  # batches' storage kept for reuse (see _BatchMemory)

    def __init__(self, **flags):
        self.flags = dict(flags)
        self._pool = []
        err = _lib.Error()
        with Config(flags) as cfg:
            check(lib.sb_config_check_task(cfg.handle, ctypes.byref(err)), err)
            self.config = cfg.to_dict()
            handle = ctypes.c_void_p()
            check(lib.sb_task_from_config(cfg.handle, ctypes.byref(handle), ctypes.byref(err)),
                  err)
        self._handle = handle.value
        facts = _lib.TaskFacts()
        lib.sb_task_get_facts(self._handle, ctypes.byref(facts))
        self.inputs = facts.inputs  # V: floats per frame
        self.classes = facts.states  # the states, the end state included: what a model predicts
        self.letters = facts.letters
        self.transitions = facts.transitions
        self.topological_entropy = facts.topological_entropy
        self.train_size = facts.train_size
        self.test_size = facts.test_size
        self.valid_size = facts.valid_size
        self.train_elements = facts.train_elements
        self.test_elements = facts.test_elements

    def __del__(self):
        # safe to call twice: the pool is emptied and the handle cleared before freeing
        pool, self._pool = getattr(self, "_pool", []), []
        for batch in pool:
            lib.sb_task_batch_free(batch)
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            lib.sb_task_free(handle)

    def _live(self):
        if not self._handle:
            raise _lib.SelectivbenchError("this Task has been freed")
        return self._handle

    def size(self, split):
        return (self.train_size, self.test_size, self.valid_size)[split_id(split)]

    def batch(self, split, indices, threads=0):
        """The batch of the samples `indices` (any iterable of ints) of split ('train', 'test'
        or 'valid': drawn as the test's, from sequences neither of the others uses), assembled on `threads` threads (0: every core; the batch does not depend
        on it). Samples are pure functions of (configuration, split, index)."""
        idx = _check.indices(indices)
        threads = _check.threads(threads)
        split = split_id(split)
        self._live()
        err = _lib.Error()
        index = idx.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))
        if self._pool:
            handle = self._pool.pop()
            st = lib.sb_task_batch_refill(handle, self._handle, split_id(split), index, len(idx),
                                          threads, ctypes.byref(err))
            if st != 0:
                self._pool.append(handle)
                check(st, err)
        else:
            out = ctypes.c_void_p()
            check(lib.sb_task_batch_make(self._handle, split_id(split), index, len(idx), threads,
                                         ctypes.byref(out), ctypes.byref(err)), err)
            handle = out.value
        memory = _BatchMemory(handle, self)
        shape, arrays = _lib.BatchShape(), _lib.BatchArrays()
        lib.sb_task_batch_view(memory.handle, ctypes.byref(shape), ctypes.byref(arrays))
        return Batch(memory, shape, arrays, idx)

    def batches(self, split="train", batch_size=None, shuffle=False, seed=0, drop_last=False,
                threads=0):
        """Iterates over a split in batches of batch_size (None: train's --batch_size default):
        in index order (as the C trainer reads the training set), or shuffled by a numpy
        generator seeded with seed."""
        if batch_size is None:
            batch_size = int(_lib.key_default("batch_size"))
        batch_size = _check.whole("batch_size", batch_size, 1, _check.INT_MAX)
        seed = _check.whole("seed", seed, 0, 2 ** 64 - 1, "a seed of 0 or more")
        threads = _check.threads(threads)
        n = self.size(split)
        order = np.arange(n, dtype=np.int64)
        if shuffle:
            np.random.default_rng(seed).shuffle(order)
        for first in range(0, n, batch_size):
            chunk = order[first:first + batch_size]
            if drop_last and len(chunk) < batch_size:
                break
            yield self.batch(split, chunk, threads)

    def grammar(self):
        """The grammar as `selectivbench grammar --json` prints it (the schema of the
        reference's vector files): states (names, the end state '#' last), successors (state
        indices), out_prob, start_states, state_ids (a state's name -> the id targets hold),
        topological_entropy (nats), num_transitions, config, ... and `letters`, the input
        letter of each state's symbol."""
        g = lib.sb_task_grammar(self._live())
        out, err = ctypes.c_void_p(), _lib.Error()
        check(lib.sb_grammar_to_json(g, ctypes.byref(out), ctypes.byref(err)), err)
        grammar = json.loads(_lib.take_string(out.value))
        grammar["letters"] = [lib.sb_class_letter(lib.sb_grammar_state_class(g, s)).decode()
                              for s in range(len(grammar["states"]))]
        return grammar

    def ceiling(self, split="test", samples=0, prior_samples=0, threads=0):
        """The ideal observer of the task (docs/reading-results.md): expected_acc (the Bayes
        accuracy), realized_acc, window_acc {"0": .., "1": .., ...} (observers that see the
        last k elements), ..., as `selectivbench ceiling --json` prints them."""
        keys = {"split": split_name(split_id(split)),
                "samples": _check.whole("samples", samples, 0, _check.INT64_MAX),
                "prior_samples": _check.whole("prior_samples", prior_samples, 0,
                                              _check.INT64_MAX),
                "threads": _check.threads(threads)}
        out, err = _lib.Ceiling(), _lib.Error()
        with Config(keys) as cfg:
            check(lib.sb_ceiling_compute(self._live(), cfg.handle, ctypes.byref(out),
                                         ctypes.byref(err)), err)
        text = ctypes.c_void_p()
        check(lib.sb_ceiling_to_json(ctypes.byref(out), ctypes.byref(text), ctypes.byref(err)),
              err)
        return json.loads(_lib.take_string(text.value))

    def __repr__(self):
        return "Task(%s)" % ", ".join("%s=%r" % kv for kv in self.flags.items())
