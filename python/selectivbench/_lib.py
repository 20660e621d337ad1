"""The C library through ctypes: finding libselectivbench.so, the structures of
include/selectivbench/selectivbench.h mirrored field by field (checked against the loaded
library's sizes), the function prototypes, and the error type.

Nothing here is internal to the library: every symbol is part of its public API.
"""

import ctypes
import ctypes.util
import os

ERROR_MSG_MAX = 512  # SB_ERROR_MSG_MAX
PATH_MAX = 4096  # the path fields of sb_train_outcome and sb_result_row

STATUS_NAMES = {0: "ok", 1: "invalid argument", 2: "i/o error", 3: "out of memory",
                4: "runtime error", 5: "diverged", 6: "excluded"}


class SelectivbenchError(Exception):
    """A failure reported by the library: `message` is its one-line message (what was
    wrong, where, what to do), `status` its sb_status name ("invalid argument", ...)."""

    def __init__(self, message, status="invalid argument"):
        super().__init__(message)
        self.message = message
        self.status = status


c_int, c_int64, c_uint64, c_double = ctypes.c_int, ctypes.c_int64, ctypes.c_uint64, ctypes.c_double
c_char_p, c_void_p, c_size_t = ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t
POINTER = ctypes.POINTER


class Error(ctypes.Structure):
    _fields_ = [("status", c_int), ("msg", ctypes.c_char * ERROR_MSG_MAX)]


class TaskFacts(ctypes.Structure):
    _fields_ = [("letters", c_int), ("inputs", c_int), ("states", c_int),
                ("transitions", c_int), ("ambiguous_letters", c_int),
                ("states_per_ambiguous_letter", c_int), ("topological_entropy", c_double),
                ("train_size", c_int64), ("test_size", c_int64),
                ("train_elements", c_int), ("test_elements", c_int), ("valid_size", c_int64)]


class BatchShape(ctypes.Structure):
    _fields_ = [("batch", c_int), ("frames", c_int), ("elements", c_int), ("inputs", c_int)]


class BatchArrays(ctypes.Structure):
    _fields_ = [("inputs", POINTER(ctypes.c_float)), ("targets", POINTER(ctypes.c_int32)),
                ("valid", POINTER(ctypes.c_uint8)), ("window_start", POINTER(ctypes.c_int32)),
                ("window_len", POINTER(ctypes.c_int32)), ("frames", POINTER(ctypes.c_int32))]


class GrammarFacts(ctypes.Structure):
    _fields_ = [("vocab", c_int), ("amb", c_int), ("amb_depth", c_int), ("seed", c_uint64),
                ("grammar_scale", c_int), ("letters", c_int), ("states", c_int),
                ("outputs", c_int), ("transitions", c_int), ("start_states", c_int * 4),
                ("topological_entropy", c_double), ("python_seed", c_int),
                ("attempts", c_int)]


class Progress(ctypes.Structure):
    _fields_ = [("is_evaluation", c_int), ("step", c_int64), ("total_steps", c_int64),
                ("samples", c_int64), ("loss", c_double), ("acc", c_double),
                ("test_loss", c_double), ("test_acc", c_double), ("lr", c_double),
                ("tokens_per_s", c_double), ("elapsed_s", c_double), ("eta_s", c_double),
                ("params", c_uint64), ("grad_acc", c_int), ("mean_loss", c_double),
                ("mean_acc", c_double), ("valid_loss", c_double), ("valid_acc", c_double)]


PROGRESS_FN = ctypes.CFUNCTYPE(None, POINTER(Progress), c_void_p)
BEGIN_FN = ctypes.CFUNCTYPE(None, c_void_p)
DB_WARNING_FN = ctypes.CFUNCTYPE(None, c_char_p, c_int, c_void_p)
STOP_FN = ctypes.CFUNCTYPE(c_int, c_void_p)


class TrainSettings(ctypes.Structure):  # callbacks and the world only: the rest are keys
    _fields_ = [("progress", PROGRESS_FN), ("user", c_void_p), ("on_begin", BEGIN_FN),
                ("on_start", PROGRESS_FN), ("on_db_warning", DB_WARNING_FN),
                ("should_stop", STOP_FN), ("world_rank", c_int), ("world_size", c_int),
                ("all_gather", c_void_p), ("world_user", c_void_p), ("all_to_all", c_void_p)]


class TrainOutcome(ctypes.Structure):
    _fields_ = [("status", c_int), ("reason", ctypes.c_char * ERROR_MSG_MAX),
                ("test_acc", c_double), ("test_loss", c_double), ("train_acc", c_double),
                ("train_loss", c_double), ("valid_acc", c_double), ("valid_loss", c_double),
                ("params", c_uint64), ("steps", c_int64),
                ("samples", c_int64), ("tokens_per_s", c_double), ("wall_s", c_double),
                ("ceiling", c_double), ("effective_memory", c_double), ("cached", c_int),
                ("run_hash", ctypes.c_char * 17), ("training_hash", ctypes.c_char * 17),
                ("database", ctypes.c_char * PATH_MAX),
                ("checkpoint", ctypes.c_char * PATH_MAX), ("grad_acc", c_int),
                ("finished_at", ctypes.c_char * 32), ("locked_by", ctypes.c_long),
                ("gather_s", c_double), ("engine", ctypes.c_char * 16), ("threads", c_int),
                ("fingerprint", ctypes.c_char * 9), ("checkpoint_fingerprint", ctypes.c_char * 9),
                ("flops_per_token", c_double), ("n_evals", c_int)]


class EvalOutcome(ctypes.Structure):
    _fields_ = [("test_acc", c_double), ("test_loss", c_double), ("test_size", c_int64),
                ("test_gap_s", c_double), ("valid_acc", c_double), ("valid_loss", c_double),
                ("valid_size", c_int64)]


class ResultRow(ctypes.Structure):
    _fields_ = [("run_hash", ctypes.c_char * 17), ("model", ctypes.c_char * 32),
                ("status", c_int), ("protocol", ctypes.c_char * 16),
                ("params", c_int64), ("test_acc", c_double), ("test_loss", c_double),
                ("train_acc", c_double), ("train_loss", c_double), ("wall_s", c_double),
                ("tokens_per_s", c_double), ("ceiling", c_double),
                ("effective_memory", c_double), ("finished_at", ctypes.c_char * 32),
                ("reason", ctypes.c_char * ERROR_MSG_MAX), ("flops_per_token", c_double),
                ("state_size", c_int64), ("attempts", c_int64),
                ("checkpoint", ctypes.c_char * PATH_MAX), ("host", ctypes.c_char * 256),
                ("rank", c_int64), ("world_size", c_int64), ("threads", c_int64),
                ("engine", ctypes.c_char * 16), ("fingerprint", ctypes.c_char * 9),
                ("valid_acc", c_double), ("valid_loss", c_double)]


class CurvePoint(ctypes.Structure):
    _fields_ = [("step", c_int64), ("samples", c_int64), ("split", c_int), ("loss", c_double),
                ("acc", c_double), ("lr", c_double), ("tokens_per_s", c_double),
                ("wall_s", c_double)]


class ExternalRun(ctypes.Structure):
    _fields_ = [("status", c_int), ("reason", c_char_p), ("params", c_int64),
                ("state_size", c_int64), ("test_acc", c_double), ("test_loss", c_double),
                ("train_acc", c_double), ("train_loss", c_double), ("wall_s", c_double),
                ("tokens_per_s", c_double), ("curve", POINTER(CurvePoint)),
                ("n_curve", c_size_t), ("code_version", c_char_p)]


class Ceiling(ctypes.Structure):
    _fields_ = [("expected_acc", c_double), ("realized_acc", c_double),
                ("expected_acc_se", c_double), ("bayes_model_acc", c_double),
                ("bayes_model_realized_acc", c_double), ("window_acc", c_double * 14),
                ("n_windows", c_int), ("p_true_mean", c_double), ("p_sq_mean", c_double), ("n_samples", c_int64),
                ("n_elements", c_int64), ("prior_samples", c_int64), ("segmented", c_int),
                ("seconds", c_double)]


# the C names of the mirrored structures, checked against sb_api_struct_size at load
STRUCTS = {"sb_error": Error, "sb_task_facts": TaskFacts, "sb_batch_shape": BatchShape,
           "sb_batch_arrays": BatchArrays, "sb_grammar_facts": GrammarFacts,
           "sb_progress": Progress, "sb_train_settings": TrainSettings,
           "sb_train_outcome": TrainOutcome, "sb_eval_outcome": EvalOutcome,
           "sb_result_row": ResultRow, "sb_curve_point": CurvePoint,
           "sb_external_run": ExternalRun, "sb_ceiling": Ceiling}

# name: (result type, argument types)
PROTOTYPES = {
    "sb_version": (c_char_p, []),
    "sb_api_struct_size": (c_size_t, [c_char_p]),
    "sb_string_free": (None, [c_void_p]),
    "sb_config_create": (c_int, [POINTER(c_void_p), POINTER(Error)]),
    "sb_config_free": (None, [c_void_p]),
    "sb_config_set_key": (c_int, [c_void_p, c_char_p, c_char_p, POINTER(Error)]),
    "sb_config_get_key": (c_int, [c_void_p, c_char_p, c_char_p, c_size_t, POINTER(Error)]),
    "sb_config_check": (c_int, [c_void_p, POINTER(Error)]),
    "sb_config_check_task": (c_int, [c_void_p, POINTER(Error)]),
    "sb_config_to_json": (c_int, [c_void_p, c_int, POINTER(c_void_p), POINTER(Error)]),
    "sb_config_run_hash": (None, [c_void_p, c_char_p]),
    "sb_config_key_count": (c_int, []),
    "sb_config_key_name": (c_char_p, [c_int]),
    "sb_config_key_default": (c_char_p, [c_int]),
    "sb_config_key_help": (c_char_p, [c_int]),
    "sb_config_key_find": (c_int, [c_char_p]),
    "sb_config_key_range": (c_int, [c_int, POINTER(c_double), POINTER(c_double)]),
    "sb_task_from_config": (c_int, [c_void_p, POINTER(c_void_p), POINTER(Error)]),
    "sb_task_free": (None, [c_void_p]),
    "sb_task_get_facts": (None, [c_void_p, POINTER(TaskFacts)]),
    "sb_task_grammar": (c_void_p, [c_void_p]),
    "sb_task_batch_make": (c_int, [c_void_p, c_int, POINTER(c_int64), c_int, c_int,
                                   POINTER(c_void_p), POINTER(Error)]),
    "sb_task_batch_refill": (c_int, [c_void_p, c_void_p, c_int, POINTER(c_int64), c_int, c_int,
                                     POINTER(Error)]),
    "sb_task_batch_view": (None, [c_void_p, POINTER(BatchShape), POINTER(BatchArrays)]),
    "sb_task_batch_free": (None, [c_void_p]),
    "sb_grammar_get_facts": (None, [c_void_p, POINTER(GrammarFacts)]),
    "sb_grammar_state_name": (c_char_p, [c_void_p, c_int]),
    "sb_grammar_state_class": (c_int, [c_void_p, c_int]),
    "sb_grammar_successor_count": (c_int, [c_void_p, c_int]),
    "sb_grammar_successor": (c_int, [c_void_p, c_int, c_int]),
    "sb_grammar_transition_prob": (c_double, [c_void_p, c_int]),
    "sb_grammar_to_json": (c_int, [c_void_p, POINTER(c_void_p), POINTER(Error)]),
    "sb_class_letter": (ctypes.c_char, [c_int]),
    "sb_ceiling_compute": (c_int, [c_void_p, c_void_p, POINTER(Ceiling),
                                   POINTER(Error)]),
    "sb_ceiling_to_json": (c_int, [POINTER(Ceiling), POINTER(c_void_p), POINTER(Error)]),
    "sb_train_config": (c_int, [c_void_p, POINTER(TrainSettings), POINTER(TrainOutcome),
                                POINTER(Error)]),
    "sb_evaluate_checkpoint": (c_int, [c_char_p, c_void_p, POINTER(EvalOutcome),
                                       POINTER(Error)]),
    "sb_checkpoint_config": (c_int, [c_char_p, POINTER(c_void_p), POINTER(Error)]),
    "sb_results_open_readonly": (c_int, [c_char_p, POINTER(c_void_p), POINTER(Error)]),
    "sb_results_close": (None, [c_void_p]),
    "sb_results_count": (c_int, [c_void_p, c_char_p, POINTER(c_size_t), POINTER(Error)]),
    "sb_results_read": (c_int, [c_void_p, c_char_p, c_size_t, POINTER(ResultRow), c_size_t,
                                POINTER(c_size_t), POINTER(Error)]),
    "sb_results_config_json": (c_int, [c_void_p, c_char_p, POINTER(c_void_p),
                                       POINTER(Error)]),
    "sb_results_curve": (c_int, [c_void_p, c_char_p, POINTER(POINTER(CurvePoint)),
                                 POINTER(c_size_t), POINTER(Error)]),
    "sb_results_curve_free": (None, [POINTER(CurvePoint)]),
    "sb_results_resolve_run": (c_int, [c_void_p, c_char_p, c_char_p, POINTER(Error)]),
    "sb_results_record_external": (c_int, [c_char_p, c_void_p, POINTER(ExternalRun),
                                           c_char_p, POINTER(Error)]),
    "sb_results_path": (c_int, [c_char_p, c_char_p, c_size_t, POINTER(Error)]),
    "sb_run_status_name": (c_char_p, [c_int]),
    "sb_run_status_parse": (c_int, [c_char_p, POINTER(c_int), POINTER(Error)]),
    "sb_report_write": (c_int, [c_char_p, c_char_p, c_void_p, POINTER(Error)]),
    "sb_bench_data_stage": (c_int, [c_void_p, c_int, c_int, POINTER(c_double),
                                    POINTER(Error)]),
}


def _candidates():
    """Where libselectivbench.so may be, in the order tried."""
    env = os.environ.get("SELECTIVBENCH_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libselectivbench.so.0")  # bundled by pip install ./python
    tree = os.path.normpath(os.path.join(here, "..", "..", "build", "libselectivbench.so.0"))
    yield tree  # used from the source tree, after ./run.sh build
    found = ctypes.util.find_library("selectivbench")  # installed (./run.sh install)
    if found:
        yield found
    yield "libselectivbench.so.0"


def _load():
    tried = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError(
        "selectivbench: libselectivbench.so not found (tried %s); build it with ./run.sh build, "
        "install it with ./run.sh install, or set SELECTIVBENCH_LIBRARY to its path"
        % ", ".join(tried))


def _declare(lib):
    for name, proto in PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = proto
    for cname, struct in STRUCTS.items():
        size = lib.sb_api_struct_size(cname.encode())
        if size != ctypes.sizeof(struct):
            raise ImportError(
                "selectivbench: %s is %d bytes in the loaded library (%s) but %d in this "
                "binding: the library and python/selectivbench come from different versions"
                % (cname, size, lib._name, ctypes.sizeof(struct)))
    return lib


lib = _declare(_load())


def key_default(name):
    """The key table's default of a key, as text (as `train --help` gives it)."""
    text = lib.sb_config_key_default(lib.sb_config_key_find(name.encode()))
    if text is None:
        raise KeyError(name)
    return text.decode()


def key_range(name):
    """The key table's range (min, max) of a numeric key, as every command checks it."""
    lo, hi = ctypes.c_double(), ctypes.c_double()
    if lib.sb_config_key_range(lib.sb_config_key_find(name.encode()), ctypes.byref(lo),
                               ctypes.byref(hi)) != 0:
        raise KeyError(name)
    return lo.value, hi.value


class Handle:
    """An owned library object: `handle` is freed by the C function named `free` on close(),
    at the end of a with block, or when the object goes."""

    free = None
    handle = None

    def close(self):
        if self.handle:
            getattr(lib, self.free)(self.handle)
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


def check(status, err):
    """Raises SelectivbenchError with the library's message when status is not SB_OK."""
    if status != 0:
        raise SelectivbenchError(err.msg.decode("utf-8", "replace"),
                                 STATUS_NAMES.get(status, "unknown status"))


def text(field):
    """A char[] field as str."""
    return field.decode("utf-8", "replace")


def take_string(ptr):
    """A string the library allocated (char **out), as str; frees it."""
    if not ptr:
        return None
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        lib.sb_string_free(ptr)


def run_status_name(code):
    """The name of a run status as the library stores it ("finished", ...; "" for none)."""
    return lib.sb_run_status_name(code).decode()


def run_status_code(name):
    """The library's code of the run status `name` ("finished", "failed", "diverged",
    "interrupted", "running"); SelectivbenchError naming the accepted names otherwise."""
    if not isinstance(name, str) or "\0" in name:
        raise SelectivbenchError("status %r: give finished, failed, diverged or interrupted"
                                 % (name,))
    code = c_int(0)
    err = Error()
    check(lib.sb_run_status_parse(name.encode(), ctypes.byref(code), ctypes.byref(err)), err)
    return code.value
