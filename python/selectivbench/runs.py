"""Runs: training and evaluating the library's own models, reading results databases, and
recording a run trained elsewhere (a PyTorch model) so that `selectivbench results`,
`report` and the dashboard show it beside the native runs."""

import ctypes
import json
import math
import os
import signal
import threading

from . import _check, _lib
from ._config import Config
from ._lib import lib, check, text
from .task import split_id, split_name

NAN = float("nan")


def _db_path(db):
    """A results database: a file (an existing one, or a name ending in .db), else a results
    folder DIR for DIR/selectivbench.db, as the command line reads --db and --results."""
    db = os.fspath(db)
    if not os.path.isfile(db) and not db.endswith(".db"):
        buf = ctypes.create_string_buffer(_lib.PATH_MAX)
        err = _lib.Error()
        check(lib.sb_results_path(db.encode(), buf, len(buf), ctypes.byref(err)), err)
        return buf.value.decode()
    return db


def _number(v):
    return None if isinstance(v, float) and math.isnan(v) else v


def _row_dict(row):
    d = {name: getattr(row, name) for name, _ in _lib.ResultRow._fields_}
    for k, v in d.items():
        if isinstance(v, bytes):
            d[k] = v.decode("utf-8", "replace")
    d["status"] = _lib.run_status_name(d["status"])
    d["hash"] = d.pop("run_hash")  # the run's id, named as `results --json` names it
    for k in ("params", "state_size", "rank", "threads"):
        if d[k] < 0:
            d[k] = None
    for k in ("checkpoint", "reason", "finished_at", "host", "engine", "fingerprint"):
        if d[k] == "":
            d[k] = None
    return {k: _number(v) for k, v in d.items()}


def _stored_config(text):
    """(config, damaged): the stored configuration as a dict, or None and why, for a run
    whose stored text is not a JSON object (`results` lists such a run, marked)."""
    if not text:
        return None, None
    try:
        config = json.loads(text)
    except ValueError:
        config = None
    if isinstance(config, dict):
        return config, None
    return None, "its stored configuration is not a JSON object"


class _Results(_lib.Handle):
    """An open read-only database (closed by close() or the with block)."""

    free = "sb_results_close"

    def __init__(self, db):
        self.path = _db_path(db)
        if not os.path.exists(self.path):
            raise _lib.SelectivbenchError("no results database at '%s'" % self.path, "i/o error")
        handle, err = ctypes.c_void_p(), _lib.Error()
        check(lib.sb_results_open_readonly(self.path.encode(), ctypes.byref(handle),
                                           ctypes.byref(err)), err)
        self.handle = handle.value

    def resolve(self, run):
        buf = ctypes.create_string_buffer(17)
        err = _lib.Error()
        check(lib.sb_results_resolve_run(self.handle, str(run).encode(), buf,
                                         ctypes.byref(err)), err)
        return buf.value.decode()


def results(db, model=None, frame=None):
    """The runs of a results database (a path, or a results folder) in the order they were
    recorded, each a dict with the keys of `selectivbench results --json`: hash (the run's id,
    which every command takes, or a unique prefix of it), model, status,
    test_acc, test_loss, train_acc, train_loss, valid_acc, valid_loss (the validation split's,
    which choices read; None before schema 6), ceiling, effective_memory, params,
    state_size, flops_per_token, wall_s, tokens_per_s, attempts, host, rank (the MPI rank of
    an MPI sweep, else None), world_size, threads, engine and fingerprint (what its bits depend
    on besides its configuration; None before schema 5), checkpoint, reason, finished_at, protocol, config (the run's configuration as a dict of flags) and
    damaged (None, or why its stored configuration could not be read: config is then None). Unknown
    numbers are None. A pandas DataFrame when pandas is installed (frame=None) or asked for
    (frame=True); a list of dicts with frame=False."""
    rows = []
    err = _lib.Error()
    with _Results(db) as r:
        first, chunk = 0, (_lib.ResultRow * 64)()
        while True:
            n = ctypes.c_size_t()
            check(lib.sb_results_read(r.handle, model.encode() if model else None, first, chunk,
                                      64, ctypes.byref(n), ctypes.byref(err)), err)
            if n.value == 0:
                break
            for i in range(n.value):
                row = _row_dict(chunk[i])
                js = ctypes.c_void_p()
                check(lib.sb_results_config_json(r.handle, row["hash"].encode(), ctypes.byref(js),
                                                 ctypes.byref(err)), err)
                s = _lib.take_string(js.value)
                row["config"], row["damaged"] = _stored_config(s)
                rows.append(row)
            first += n.value
    if frame is False:
        return rows
    try:
        import pandas
    except ImportError:
        if frame:
            raise
        return rows
    return pandas.DataFrame(rows)


def curve(db, run):
    """The learning curve of a run (its hash or a unique prefix of it): a list of dicts
    step, samples, split ('train', 'test' or 'valid'), loss, acc, lr, tokens_per_s, wall_s,
    ordered by step (test, train, valid), as `selectivbench results --curves RUN` prints it."""
    err = _lib.Error()
    with _Results(db) as r:
        full = r.resolve(run)
        points = ctypes.POINTER(_lib.CurvePoint)()
        n = ctypes.c_size_t()
        check(lib.sb_results_curve(r.handle, full.encode(), ctypes.byref(points),
                                   ctypes.byref(n), ctypes.byref(err)), err)
        try:
            out = []
            for i in range(n.value):
                p = points[i]
                out.append({"step": p.step, "samples": p.samples if p.samples >= 0 else None,
                            "split": split_name(p.split),
                            "loss": _number(p.loss), "acc": _number(p.acc), "lr": _number(p.lr),
                            "tokens_per_s": _number(p.tokens_per_s),
                            "wall_s": _number(p.wall_s)})
            return out
        finally:
            if points:
                lib.sb_results_curve_free(points)


def _float(d, key, where="metrics"):
    return _check.real("%s %s" % (where, key), d.get(key))


def _count(d, key, where="metrics"):
    """A count that may be unknown (None: -1, as the library stores it)."""
    v = d.get(key)
    return -1 if v is None else _check.whole("%s %s" % (where, key), v, 0, _check.INT64_MAX,
                                             "a whole number 0 or more")


def _curve_points(points):
    """The curve as the library's array, each point checked; (step, split) unique."""
    arr = (_lib.CurvePoint * max(len(points), 1))()
    seen = set()
    for i, p in enumerate(points):
        if not isinstance(p, dict):
            raise _lib.SelectivbenchError("curve point %d: give a dict (step, split, loss, acc, "
                                          "...), not %r" % (i, p))
        where = "curve point %d" % i
        if p.get("step") is None:
            raise _lib.SelectivbenchError("%s has no step" % where)
        step = _check.whole(where + " step", p["step"], 0, _check.INT64_MAX,
                            "a step of 0 or more")
        split = split_id(p.get("split", "test"))
        if (step, split) in seen:
            raise _lib.SelectivbenchError("%s: step %d of the %s split is given twice; give each "
                                          "evaluation once" % (where, step,
                                                               split_name(split)))
        seen.add((step, split))
        arr[i] = _lib.CurvePoint(step=step, samples=_count(p, "samples", where), split=split,
                                 loss=_float(p, "loss", where), acc=_float(p, "acc", where),
                                 lr=_float(p, "lr", where),
                                 tokens_per_s=_float(p, "tokens_per_s", where),
                                 wall_s=_float(p, "wall_s", where))
    return arr


def record_run(db, config, metrics, curve=None, code_version=None):
    """Records a run trained outside the library in the results database db (a path, or a
    results folder; created if missing), exactly as a native run is stored, and returns its
    run hash.

    config   the flags of the task it trained and was tested on and the training keys it
             used, with model set to the model's own name ('torch_lstm': letters, digits,
             _ . - :, not a name of selectivbench's models)
    metrics  test_acc, test_loss, train_acc, train_loss, params (trainable parameters),
             state_size (floats carried from frame to frame), wall_s, tokens_per_s, status
             ('finished' by default; 'failed', 'diverged', 'interrupted'), reason
    curve    its evaluations: dicts with step, samples, split ('train', 'test' or 'valid':
             the last 'valid' point gives the run's valid_acc and valid_loss), loss, acc,
             and optionally lr, tokens_per_s, wall_s

    The task's ceiling and the run's effective memory are computed and stored, as for a
    native run. Raises SelectivbenchError (e.g. the database already has this run)."""
    path = _db_path(db)
    if not isinstance(metrics, dict):
        raise _lib.SelectivbenchError("metrics %r: give a dict (test_acc, test_loss, ...)"
                                      % (metrics,))
    points = list(curve or [])
    arr = _curve_points(points)
    reason = metrics.get("reason")
    run = _lib.ExternalRun(
        status=_lib.run_status_code(metrics.get("status", "finished")),
        reason=_check.text("reason", reason) if reason else None,
        params=_count(metrics, "params"), state_size=_count(metrics, "state_size"),
        test_acc=_float(metrics, "test_acc"), test_loss=_float(metrics, "test_loss"),
        train_acc=_float(metrics, "train_acc"), train_loss=_float(metrics, "train_loss"),
        wall_s=_float(metrics, "wall_s"), tokens_per_s=_float(metrics, "tokens_per_s"),
        curve=arr, n_curve=len(points),
        code_version=_check.text("code_version", code_version) if code_version else None)
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    buf = ctypes.create_string_buffer(17)
    err = _lib.Error()
    with Config(config) as cfg:
        check(lib.sb_results_record_external(path.encode(), cfg.handle, ctypes.byref(run), buf,
                                             ctypes.byref(err)), err)
    return buf.value.decode()


def _outcome_dict(o):
    d = {}
    for name, _ in _lib.TrainOutcome._fields_:
        v = getattr(o, name)
        d[name] = text(v) if isinstance(v, bytes) else _number(v)
    d["status"] = _lib.run_status_name(o.status)
    d["hash"] = d.pop("run_hash")
    d["cached"] = bool(d["cached"])
    return d


def train(config, results=None, threads=0, progress=None, save_checkpoint=True, force=False,
          resume=False):
    """Trains one of the library's models on its task, as `selectivbench train` does, and
    returns the outcome as a dict (status, test_acc, test_loss, ceiling, effective_memory,
    hash, checkpoint, steps, wall_s, ...). config: a dict of flags (model, feat_size, the
    task keys, ...); the outcome's hash is the run's id. results: a results folder to record
    the run in (its database, checkpoints), or None to train in memory. progress: None, True
    (print a line at every evaluation) or a function called with a dict after every update
    and evaluation. resume: continue an interrupted run from its checkpoint.

    Ctrl-C (SIGINT, when called from the main thread) stops the run after its current
    update, with its checkpoint written and the run recorded as interrupted (as `train` on
    the command line), then raises KeyboardInterrupt; train(..., resume=True) continues it.
    An exception raised by the progress function stops the run the same way and is raised
    again. Raises SelectivbenchError with the library's message (a diverged run included)."""
    state = {"stop": False, "error": None}

    def on_progress(p, user):
        if state["error"] is not None:
            return
        try:
            q = p.contents
            info = {name: _number(getattr(q, name)) for name, _ in _lib.Progress._fields_}
            info["is_evaluation"] = bool(info["is_evaluation"])
            if progress is True:
                if info["is_evaluation"]:
                    print("step %d/%d  loss %.4f  test %.4f  %.0f tok/s" % (
                        info["step"], info["total_steps"], info["loss"] or NAN,
                        info["test_acc"] if info["test_acc"] is not None else NAN,
                        info["tokens_per_s"] or 0), flush=True)
            elif progress is not None:
                progress(info)
        except BaseException as e:  # ctypes would print and drop it: stop and raise later
            state["error"] = e

    def should_stop(user):
        # Python runs its signal handlers here, on the training (calling) thread
        return 1 if state["stop"] or state["error"] is not None else 0

    # where and how are keys of the configuration (the runtime keys), as on the command line
    flags = dict(config or {})
    flags.update({"results": "" if results is None else os.fspath(results), "threads": threads,
                  "save_model": bool(save_checkpoint), "force": bool(force),
                  "resume": bool(resume)})
    settings = _lib.TrainSettings()
    callbacks = [_lib.STOP_FN(should_stop)]  # alive for the call
    settings.should_stop = callbacks[0]
    if progress is not None:
        callbacks.append(_lib.PROGRESS_FN(on_progress))
        settings.progress = callbacks[-1]
    previous = None
    if threading.current_thread() is threading.main_thread():
        def on_sigint(signum, frame):
            state["stop"] = True
        previous = signal.signal(signal.SIGINT, on_sigint)
    out, err = _lib.TrainOutcome(), _lib.Error()
    try:
        with Config(flags) as cfg:
            st = lib.sb_train_config(cfg.handle, ctypes.byref(settings), ctypes.byref(out),
                                     ctypes.byref(err))
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if state["error"] is not None:
        raise state["error"]
    check(st, err)
    result = _outcome_dict(out)
    if state["stop"] and result["status"] == "interrupted":
        raise KeyboardInterrupt("run %s interrupted after update %d (%s); train(..., "
                                "resume=True) continues it" % (result["hash"], result["steps"],
                                                               result["checkpoint"] or
                                                               "no checkpoint"))
    return result


def evaluate(checkpoint, threads=0, **overrides):
    """Evaluates a checkpoint written by the library on the test split of the configuration
    recorded in it, and on its validation split, with flags overridden (e.g. test_dur=2.0 for
    longer test gaps). Returns {test_acc, test_loss, test_size, test_gap_s, valid_acc,
    valid_loss, valid_size}."""
    out, err = _lib.EvalOutcome(), _lib.Error()
    threads = _check.threads(threads)
    with Config.from_checkpoint(checkpoint, dict(overrides, threads=threads)) as cfg:
        check(lib.sb_evaluate_checkpoint(os.fspath(checkpoint).encode(), cfg.handle,
                                         ctypes.byref(out), ctypes.byref(err)), err)
    return {"test_acc": out.test_acc, "test_loss": out.test_loss, "test_size": out.test_size,
            "test_gap_s": out.test_gap_s, "valid_acc": _number(out.valid_acc),
            "valid_loss": _number(out.valid_loss), "valid_size": out.valid_size}


def report(db, out_dir):
    """Writes the paper's figures and report.md for a results database (a path or a results
    folder) into out_dir, as `selectivbench report` does; external runs are drawn beside the
    native ones. Returns {figures, runs_read, runs_used, report}."""
    class ReportOutcome(ctypes.Structure):  # the leading fields of sb_report_outcome
        _fields_ = [("runs_read", ctypes.c_int), ("runs_used", ctypes.c_int),
                    ("figures", ctypes.c_int), ("yardsticks_missing", ctypes.c_int),
                    ("yardsticks_error", ctypes.c_char * _lib.ERROR_MSG_MAX),
                    ("table_path", ctypes.c_char * _lib.PATH_MAX)]
    size = lib.sb_api_struct_size(b"sb_report_outcome")
    buf = ctypes.create_string_buffer(max(size, ctypes.sizeof(ReportOutcome)))
    err = _lib.Error()
    check(lib.sb_report_write(_db_path(db).encode(), os.fspath(out_dir).encode(), buf,
                              ctypes.byref(err)), err)
    out = ReportOutcome.from_buffer(buf)
    return {"figures": out.figures, "runs_read": out.runs_read, "runs_used": out.runs_used,
            "report": text(out.table_path)}
