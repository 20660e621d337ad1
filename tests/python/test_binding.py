"""The Python binding (python/selectivbench) against the command line: batches bit for bit
equal to `selectivbench data --json --batch` on tasks 1 to 4 and interleaved walks, the grammar equal to
`selectivbench grammar --json`, errors carrying the C message, results round trips, an
external run in `results --json` and `report`, training and evaluation through the library.

Run by tests/cli/test_python.sh (ctest test_python), which sets SELECTIVBENCH_LIBRARY and
SELECTIVBENCH_CLI to the build's library and program.
"""

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import selectivbench as sb

CLI = os.environ.get("SELECTIVBENCH_CLI", "build/selectivbench")

# the paper's four task families at small sizes, and the clean protocol
TASKS = {
    "task1": dict(vocab=9, amb=8, grammar_scale=True, train_seqlen_max=12, test_seqlen_max=12,
                  dataset_size=200, test_size=50),
    "task2": dict(vocab=7, amb=4, amb_depth=3, train_seqlen_max=10, test_seqlen_max=10,
                  train_gap_min=0.1, train_gap_max=0.6, train_noise=0.1, dataset_size=200,
                  test_size=50, seed=3),
    "task3": dict(vocab=7, amb=4, amb_depth=3, train_seqlen_max=10, test_seqlen_max=10,
                  train_gap_min=0.1, train_gap_max=0.5, grammar_gap=True, dataset_size=200,
                  test_size=50),
    "task4": dict(vocab=7, amb=4, amb_depth=3, train_seqlen_max=10, test_seqlen_max=10,
                  train_gap_min=0.1, train_gap_max=0.3, test_dur=1.2, dataset_size=200,
                  test_size=50, dist_dur="lognormal"),
    "clean": dict(vocab=9, amb=8, grammar_scale=True, train_seqlen_max=12, test_seqlen_max=12,
                  dataset_size=200, test_size=50, protocol="clean", gap_prob=0.5,
                  train_gap_max=0.4),
    # interleaved walks (issue 37): 3 walks a training sample, 2 a test sample, with noise
    "walks": dict(vocab=7, amb=4, amb_depth=3, train_seqlen_max=12, test_seqlen_max=8,
                  walk_len=4, train_gap_max=0.4, train_noise=0.1, dataset_size=200,
                  test_size=50),
}


def cli_args(flags):
    args = []
    for k, v in flags.items():
        args += ["--" + k, sb._config.flag_text(v)]
    return args


def run_cli(*args, check=True):
    p = subprocess.run([CLI] + list(args), capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError("%s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr))
    return p


class TestImport(unittest.TestCase):
    def test_without_numpy_one_clear_line(self):
        # numpy made unimportable in a child interpreter: the binding names what to install
        code = "import sys; sys.modules['numpy'] = None; import selectivbench"
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=dict(os.environ))
        self.assertNotEqual(p.returncode, 0)
        last = p.stderr.strip().splitlines()[-1]
        self.assertIn("selectivbench needs numpy: install it", last)
        self.assertIn("python3-numpy", last)


class TestBatches(unittest.TestCase):
    def test_batches_equal_the_command_line_bit_for_bit(self):
        samples = [0, 3, 1, 17, 42]
        for name, flags in TASKS.items():
            task = sb.Task(**flags)
            for split in ("train", "test", "valid"):
                with self.subTest(task=name, split=split):
                    out = run_cli("data", *cli_args(flags), "--json", "--batch", "--split",
                                  split, "--samples", ",".join(map(str, samples))).stdout
                    ref = json.loads(out)["batch"]
                    B, T, E, V = ref["shape"]
                    b = task.batch(split, samples)
                    self.assertEqual(b.inputs.shape, (B, T, V))
                    self.assertEqual(b.inputs.dtype, np.float32)
                    want = np.array(ref["inputs"], dtype=np.float64).astype(np.float32)
                    self.assertTrue(np.array_equal(b.inputs.reshape(-1).view(np.uint32),
                                                   want.view(np.uint32)))
                    self.assertEqual(b.targets.dtype, np.int64)
                    self.assertEqual(b.targets.reshape(-1).tolist(), ref["targets"])
                    self.assertEqual(b.valid.reshape(-1).astype(int).tolist(), ref["valid"])
                    self.assertEqual(b.window_start.reshape(-1).tolist(), ref["window_start"])
                    self.assertEqual(b.window_len.reshape(-1).tolist(), ref["window_len"])
                    self.assertEqual(b.lengths.tolist(), b.valid.sum(axis=1).tolist())
                    # the elements: the command line's class sequences, one per window
                    seqs = json.loads(out)["samples"]
                    self.assertEqual(b.elements.tolist(), [len(s["class_seq"]) for s in seqs])

    def test_batches_do_not_depend_on_threads_or_reuse(self):
        task = sb.Task(**TASKS["task2"])
        first = task.batch("train", range(8), threads=1)
        kept = first.inputs.copy()
        for _ in range(3):  # storage goes back to the pool and is refilled
            other = task.batch("train", range(8, 24), threads=2)
            del other
        again = task.batch("train", range(8), threads=2)
        self.assertTrue(np.array_equal(first.inputs, again.inputs))
        self.assertTrue(np.array_equal(first.inputs, kept))  # a live batch is never reused
        self.assertTrue(np.array_equal(first.targets, again.targets))

    def test_iteration_covers_the_split(self):
        task = sb.Task(**TASKS["task1"])
        seen = []
        for b in task.batches("test", batch_size=16):
            seen += b.indices.tolist()
        self.assertEqual(seen, list(range(task.test_size)))
        shuffled = [i for b in task.batches("train", 64, shuffle=True, seed=5, drop_last=True)
                    for i in b.indices.tolist()]
        self.assertEqual(len(shuffled), 192)
        self.assertEqual(len(set(shuffled)), 192)
        self.assertNotEqual(shuffled, sorted(shuffled))

    def test_element_targets_are_the_state_ids(self):
        task = sb.Task(**TASKS["task2"])
        g = task.grammar()
        b = task.batch("train", [0])
        seq = json.loads(run_cli("data", *cli_args(TASKS["task2"]), "--json", "--samples",
                                 "0").stdout)["samples"][0]["state_seq"]
        self.assertEqual(b.element_targets[0, :len(seq)].tolist(),
                         [g["state_ids"][s] for s in seq])


class TestTaskFacts(unittest.TestCase):
    def test_grammar_equals_the_command_line(self):
        flags = TASKS["task2"]
        grammar_flags = {k: v for k, v in flags.items()
                         if k in ("vocab", "amb", "amb_depth", "seed")}
        ref = json.loads(run_cli("grammar", *cli_args(grammar_flags), "--json").stdout)
        g = sb.Task(**flags).grammar()
        letters = g.pop("letters")
        self.assertEqual(g, ref)
        self.assertEqual(letters[-1], "#")
        task = sb.Task(**flags)
        self.assertEqual(task.classes, ref["d_output"])
        self.assertAlmostEqual(task.topological_entropy, ref["topological_entropy"], places=12)
        self.assertEqual(task.config["vocab"], 7)

    def test_ceiling_equals_the_command_line(self):
        flags = TASKS["task1"]
        ref = json.loads(run_cli("ceiling", *cli_args(flags), "--json", "--threads", "1").stdout)
        got = sb.Task(**flags).ceiling(threads=1)
        self.assertEqual(got["expected_acc"], ref["expected_acc"])
        self.assertEqual(got["window_acc"], ref["window_acc"])

    def test_defaults_are_the_key_table(self):
        d = sb.defaults()
        self.assertEqual(d["vocab"], "41")
        self.assertEqual(d["model"], "transformer")


class TestErrors(unittest.TestCase):
    def assert_c_message(self, flags, cli_line_args):
        with self.assertRaises(sb.SelectivbenchError) as ctx:
            sb.Task(**flags)
        p = run_cli(*cli_line_args, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertEqual(p.stderr.strip(), "selectivbench data: error: " + ctx.exception.message)
        self.assertEqual(ctx.exception.status, "invalid argument")

    def test_bad_flags_carry_the_c_message(self):
        self.assert_c_message(dict(nosuch=1), ["data", "--nosuch", "1"])
        self.assert_c_message(dict(amb=60), ["data", "--amb", "60", "--json", "--samples", "0"])
        self.assert_c_message(dict(amb="x"), ["data", "--amb", "x"])

    def test_bad_indices_and_splits(self):
        task = sb.Task(**TASKS["task1"])
        with self.assertRaisesRegex(sb.SelectivbenchError, "sample index 200"):
            task.batch("train", [0, 200])
        with self.assertRaisesRegex(sb.SelectivbenchError, "unknown split"):
            task.batch("validation", [0])
        with self.assertRaisesRegex(sb.SelectivbenchError, "at least one sample"):
            task.batch("train", [])
        b = task.batch("train", [1])  # a failed call leaves the pool usable
        self.assertEqual(len(b), 1)
        self.assertEqual(task.size("valid"), task.valid_size)  # as many as the test's
        self.assertEqual(task.valid_size, task.test_size)


    def test_run_status_names_are_the_library_s(self):
        names = ["running", "finished", "failed", "diverged", "interrupted"]
        self.assertEqual([sb._lib.run_status_name(sb._lib.run_status_code(n)) for n in names],
                         names)
        self.assertEqual(sb._lib.run_status_name(0), "")
        for bad in ("done", "", 3, "finished\0"):
            with self.assertRaises(sb.SelectivbenchError):
                sb._lib.run_status_code(bad)


class TestRuns(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sb_python_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def record(self, **extra):
        config = dict(model="torch_lstm", feat_size=16, lr=0.003, **TASKS["task1"])
        config.update(extra)
        curve = [dict(step=3, samples=192, split="test", loss=1.5, acc=0.4, lr=0.003),
                 dict(step=3, samples=192, split="train", loss=1.7, acc=0.35),
                 dict(step=6, samples=384, split="test", loss=1.1, acc=0.55, wall_s=2.0)]
        metrics = dict(test_acc=0.55, test_loss=1.1, train_acc=0.5, train_loss=1.2,
                       params=1234, state_size=32, wall_s=2.5, tokens_per_s=1500.0)
        return sb.record_run(self.dir, config, metrics, curve, code_version="test"), config

    def test_external_run_round_trip(self):
        run, config = self.record()
        rows = sb.results(self.dir, frame=False)
        self.assertEqual(len(rows), 1)
        row = rows[0]
        self.assertEqual(row["hash"], run)
        self.assertEqual(row["model"], "torch_lstm")
        self.assertEqual(row["status"], "finished")
        self.assertEqual(row["params"], 1234)
        self.assertEqual(row["state_size"], 32)
        self.assertEqual(row["test_acc"], 0.55)
        self.assertIsNone(row["flops_per_token"])
        self.assertTrue(0 < row["ceiling"] <= 1)  # the task's yardsticks, as a native run's
        self.assertIsNotNone(row["effective_memory"])
        self.assertEqual(row["config"]["model"], "torch_lstm")
        self.assertIsNone(row["checkpoint"])
        # the same keys and values as the command line's JSON, the reason aside
        cli = json.loads(run_cli("results", "--db", os.path.join(self.dir, "selectivbench.db"),
                                 "--json").stdout)["runs"][0]
        for key, value in cli.items():
            if key != "ceiling_se":
                self.assertEqual(row[key], value, key)
        self.assertEqual(row["config"]["lr"], 0.003)
        self.assertEqual(row["config"]["dataset_size"], 200)
        points = sb.curve(self.dir, run[:6])
        self.assertEqual([(p["step"], p["split"], p["acc"]) for p in points],
                         [(3, "test", 0.4), (3, "train", 0.35), (6, "test", 0.55)])
        self.assertEqual(points[2]["samples"], 384)
        self.assertIsNone(points[1]["lr"])
        # the command line sees the same run
        db = os.path.join(self.dir, "selectivbench.db")
        listed = json.loads(run_cli("results", "--db", db, "--json").stdout)["runs"]
        self.assertEqual([(r["hash"], r["model"], r["test_acc"]) for r in listed],
                         [(run, "torch_lstm", 0.55)])
        # --model and --filter model= take the external model the database has
        for args in (["--model", "torch_lstm"], ["--filter", "model=torch_lstm"]):
            only = json.loads(run_cli("results", "--db", db, "--json", *args).stdout)["runs"]
            self.assertEqual([r["hash"] for r in only], [run])
        p = run_cli("results", "--db", db, "--model", "torch_lstn", check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--model: 'torch_lstn' is not one of", p.stderr)
        self.assertIn("or in this database: torch_lstm; did you mean 'torch_lstm'?", p.stderr)
        curves = json.loads(run_cli("results", "--db", db, "--curves", run, "--json").stdout)
        self.assertIn("0.55", json.dumps(curves))
        # recorded twice: refused with the C message, nothing changed
        with self.assertRaisesRegex(sb.SelectivbenchError, "already has run " + run):
            self.record()
        self.assertEqual(len(sb.results(self.dir, frame=False)), 1)

    def test_external_run_in_the_report_beside_a_native_run(self):
        self.record()
        self.record(seed=2)
        out = sb.train(dict(model="gru", feat_size=8, layers=1, batch_size=16, epoch_size=100,
                            **TASKS["task1"]), results=self.dir, threads=1)
        self.assertEqual(out["status"], "finished")
        rep = sb.report(self.dir, os.path.join(self.dir, "report"))
        self.assertEqual(rep["runs_read"], 3)
        self.assertEqual(rep["runs_used"], 3)
        with open(rep["report"]) as f:
            md = f.read()
        self.assertIn("torch_lstm", md)
        self.assertIn("| gru |", md)
        p = run_cli("report", self.dir, "--out", os.path.join(self.dir, "report_cli"))
        with open(os.path.join(self.dir, "report_cli", "report.md")) as f:
            self.assertIn("torch_lstm", f.read())
        del p

    def test_record_refusals(self):
        with self.assertRaisesRegex(sb.SelectivbenchError, "torch_gru"):
            self.record(model="gru")
        with self.assertRaisesRegex(sb.SelectivbenchError, "letters, digits"):
            self.record(model="my model")
        with self.assertRaisesRegex(sb.SelectivbenchError, "unknown run status 'done'"):
            sb.record_run(self.dir, dict(model="x1", **TASKS["task1"]), dict(status="done"))
        with self.assertRaisesRegex(sb.SelectivbenchError, "unknown flag --nosuch"):
            self.record(nosuch=3)
        with self.assertRaisesRegex(sb.SelectivbenchError, "no results database"):
            sb.results(os.path.join(self.dir, "missing"))

    def test_train_and_evaluate_a_native_model(self):
        config = dict(model="gru", feat_size=8, layers=1, batch_size=16, epoch_size=100,
                      **TASKS["task4"])
        seen = []
        out = sb.train(config, results=self.dir, threads=1, progress=seen.append)
        self.assertEqual(out["status"], "finished")
        self.assertTrue(0 <= out["test_acc"] <= 1)
        self.assertTrue(any(p["is_evaluation"] for p in seen))
        self.assertEqual(seen[-1]["step"], out["steps"])
        again = sb.train(config, results=self.dir, threads=1)
        self.assertTrue(again["cached"])
        ev = sb.evaluate(out["checkpoint"], threads=1)
        self.assertEqual(ev["test_acc"], out["test_acc"])
        self.assertEqual(ev["test_size"], 50)
        longer = sb.evaluate(out["checkpoint"], threads=1, test_dur=2.0)
        self.assertEqual(longer["test_gap_s"], 2.0)
        with self.assertRaisesRegex(sb.SelectivbenchError, "unknown model|did you mean"):
            sb.train(dict(config, model="gruu"))


class TestHostileArguments(unittest.TestCase):
    """Every argument is checked at the boundary: a bad one raises SelectivbenchError with one
    line and stores or changes nothing; none can crash the interpreter."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sb_python_hostile_")
        self.task = sb.Task(**TASKS["task1"])

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_thread_counts_are_capped_as_the_command_line_caps_them(self):
        cfg = dict(model="gru", feat_size=8, layers=1, batch_size=16, epoch_size=100,
                   **TASKS["task1"])
        for threads in (10 ** 6, 1025, -5, 2 ** 40, 1.5, True):
            with self.assertRaisesRegex(sb.SelectivbenchError, "threads"):
                self.task.batch("train", [0, 1], threads=threads)
            with self.assertRaisesRegex(sb.SelectivbenchError, "threads"):
                self.task.ceiling(samples=5, threads=threads)
            with self.assertRaisesRegex(sb.SelectivbenchError, "threads"):
                sb.train(cfg, threads=threads)
            with self.assertRaisesRegex(sb.SelectivbenchError, "threads"):
                sb.evaluate(os.path.join(self.dir, "none.safetensors"), threads=threads)
        # the library refuses them too, for callers that skip the binding: threads is a
        # key of the configuration, with the command line's range
        lib, err = sb._lib.lib, sb._lib.Error()
        with sb._config.Config() as cfg:
            for threads in (10 ** 6, -5):
                st = lib.sb_config_set_key(cfg.handle, b"threads", str(threads).encode(),
                                           __import__("ctypes").byref(err))
                self.assertNotEqual(st, 0)
                self.assertIn("--threads %d is out of range [0, 1024]" % threads,
                              err.msg.decode())
        self.assertEqual(self.task.batch("train", [0], threads=1024).inputs.shape[0], 1)

    def test_a_task_freed_twice_with_pooled_batches(self):
        task = sb.Task(**TASKS["task2"])
        for _ in range(3):
            b = task.batch("train", range(4))
        kept = task.batch("train", range(2))  # outlives its task's storage pool
        del b
        task.__del__()
        task.__del__()
        with self.assertRaisesRegex(sb.SelectivbenchError, "freed"):
            task.batch("train", [0])
        self.assertEqual(len(kept), 2)
        del kept  # freed on its own: the task takes no storage back

    def test_bad_indices_batch_sizes_and_texts(self):
        for indices in ([0.7, 1.9], np.array([0.5]), [True, False], ["1"], [2 ** 70],
                        np.array([2 ** 64 - 1], dtype=np.uint64), [[0, 1]]):
            with self.assertRaises(sb.SelectivbenchError, msg=repr(indices)):
                self.task.batch("train", indices)
        self.assertEqual(self.task.batch("train", np.array([1, 2], dtype=np.uint8)).indices
                         .tolist(), [1, 2])
        for size in (-1, 0, 2.0, "4"):
            with self.assertRaisesRegex(sb.SelectivbenchError, "batch_size"):
                next(self.task.batches(batch_size=size))
        with self.assertRaisesRegex(sb.SelectivbenchError, "split"):
            self.task.batch(1.0, [0])
        with self.assertRaisesRegex(sb.SelectivbenchError, "NUL byte"):
            sb.Task(**dict(TASKS["task2"], seed="1\0junk"))
        with self.assertRaisesRegex(sb.SelectivbenchError, "NUL byte"):
            sb.Task(**{"seed\0x": 1})
        with self.assertRaisesRegex(sb.SelectivbenchError, "samples"):
            self.task.ceiling(samples=2.5)

    def record(self, metrics=None, curve=None):
        config = dict(model="torch_lstm", feat_size=16, **TASKS["task1"])
        good = dict(test_acc=0.5, test_loss=1.0, train_acc=0.5, train_loss=1.0, params=100,
                    wall_s=1.0)
        good.update(metrics or {})
        return sb.record_run(self.dir, config, good, curve)

    def test_impossible_metrics_are_refused_and_nothing_is_stored(self):
        bad_metrics = [("test_acc", math.inf), ("test_acc", -0.5), ("test_acc", 1.5),
                       ("test_loss", -math.inf), ("test_loss", math.inf), ("train_loss", -1),
                       ("wall_s", -1), ("tokens_per_s", math.inf), ("params", -5),
                       ("params", 1.7), ("params", 2 ** 70), ("state_size", -2),
                       ("test_acc", "0.5"), ("test_acc", math.nan), ("status", "ok\0")]
        for key, value in bad_metrics:
            with self.assertRaises(sb.SelectivbenchError, msg="%s=%r" % (key, value)) as cm:
                self.record({key: value})
            self.assertNotIn("\n", cm.exception.message)
        point = dict(step=1, split="test", loss=1.0, acc=0.5)
        bad_curves = [[dict(point, step=2 ** 70)], [dict(point, step=-1)],
                      [dict(point, step=1.5)], [point, dict(point)], [dict(point, acc=7.0)],
                      [dict(point, loss=-1.0)], [dict(point, samples=-3)],
                      [dict(point, lr=math.inf)], [dict(point, wall_s=-2.0)], ["step 1"]]
        for curve in bad_curves:
            with self.assertRaises(sb.SelectivbenchError, msg=repr(curve)):
                self.record(curve=curve)
        db = os.path.join(self.dir, "selectivbench.db")
        if os.path.exists(db):  # a refused record stores nothing
            self.assertEqual(sb.results(self.dir, frame=False), [])
        # and the library refuses them too, without the binding's checks
        run = sb._lib.ExternalRun(status=sb._lib.run_status_code("finished"), params=-1,
                                  state_size=-1,
                                  test_acc=1.5, test_loss=1.0, train_acc=math.nan,
                                  train_loss=math.nan, wall_s=math.nan,
                                  tokens_per_s=math.nan, n_curve=0)
        err = sb._lib.Error()
        ctypes = __import__("ctypes")
        with sb._config.Config(dict(model="torch_lstm", **TASKS["task1"])) as cfg:
            st = sb._lib.lib.sb_results_record_external(db.encode(), cfg.handle,
                                                        ctypes.byref(run), None,
                                                        ctypes.byref(err))
        self.assertNotEqual(st, 0)
        self.assertIn("test_acc 1.5: give an accuracy in [0, 1]", err.msg.decode())
        # valid extremes pass: accuracies 0 and 1, unknown (None) values
        self.record(dict(test_acc=1.0, train_acc=0.0, test_loss=None, params=None),
                    [dict(point, acc=0.0), dict(point, step=2, acc=1.0)])
        self.assertEqual(len(sb.results(self.dir, frame=False)), 1)

    def test_a_damaged_configuration_is_listed_and_marked(self):
        import sqlite3
        good = self.record()
        db = os.path.join(self.dir, "selectivbench.db")
        con = sqlite3.connect(db)
        con.execute("PRAGMA ignore_check_constraints = ON")
        con.execute("UPDATE runs SET config_json = '{\"feat_size\": ' WHERE hash = ?", (good,))
        con.commit()
        con.close()
        rows = sb.results(self.dir, frame=False)
        self.assertEqual([(r["hash"], r["config"], r["damaged"]) for r in rows],
                         [(good, None, "its stored configuration is not a JSON object")])
        listed = json.loads(run_cli("results", "--db", db, "--json").stdout)["runs"]
        self.assertEqual([(r["hash"], r["config"], r["damaged"]) for r in listed],
                         [(good, None, "its stored configuration is not a JSON object")])
        table = run_cli("results", "--db", db).stdout
        self.assertIn("damaged: its stored configuration is not a JSON object", table)
        self.assertIn("1 of 1 runs (1 with a damaged configuration", table)
        csv = run_cli("results", "--db", db, "--csv").stdout.splitlines()
        self.assertTrue(csv[0].endswith(",damaged"), csv[0])
        self.assertTrue(csv[1].endswith(",its stored configuration is not a JSON object"))


INTERRUPTED_RUN = """
import sys, time, selectivbench as sb
config = dict(model="gru", feat_size=8, layers=1, batch_size=16, epoch_size=100,
              vocab=9, amb=8, grammar_scale=True, train_seqlen_max=12, test_seqlen_max=12,
              dataset_size=20000, test_size=50)
def progress(p):
    if p["step"] == 2:
        print("started", flush=True)
        time.sleep(1)  # the signal arrives during this update, whatever the machine's load
try:
    sb.train(config, results=sys.argv[1], threads=1, progress=progress)
    print("finished")
except KeyboardInterrupt as e:
    print("interrupted:", e)
out = sb.train(config, results=sys.argv[1], threads=1, resume=True)
print("resumed:", out["status"], out["steps"])
"""


class TestStopping(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sb_python_stop_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_ctrl_c_stops_with_a_checkpoint_and_resume_finishes(self):
        p = subprocess.Popen([sys.executable, "-c", INTERRUPTED_RUN, self.dir],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(p.stdout.readline().strip(), "started")
        p.send_signal(signal.SIGINT)
        out, errs = p.communicate(timeout=300)
        self.assertEqual(p.returncode, 0, errs)
        lines = out.strip().splitlines()
        self.assertTrue(lines[0].startswith("interrupted: run "), out)
        self.assertIn("resume=True", lines[0])
        self.assertEqual(lines[-1], "resumed: finished 1250", out)
        rows = sb.results(self.dir, frame=False)
        self.assertEqual([(r["status"], r["attempts"]) for r in rows], [("finished", 2)])

    def test_an_exception_in_progress_stops_the_run_and_is_raised(self):
        def progress(p):
            if p["step"] == 3:
                raise ValueError("stop here")
        config = dict(model="gru", feat_size=8, layers=1, batch_size=16, epoch_size=100,
                      **TASKS["task1"])
        with self.assertRaisesRegex(ValueError, "stop here"):
            sb.train(config, results=self.dir, threads=1, progress=progress)
        rows = sb.results(self.dir, frame=False)
        self.assertEqual(rows[0]["status"], "interrupted")


class TestTorch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        try:
            import torch  # noqa: F401
        except ImportError:
            raise unittest.SkipTest("torch is not importable (Debian: python3-torch): the "
                                    "selectivbench.torch tests are skipped")

    def test_dataset_loss_and_accuracy(self):
        import torch
        from selectivbench.torch import TaskDataset, element_accuracy, element_scores, loss
        task = sb.Task(**TASKS["task2"])
        data = list(torch.utils.data.DataLoader(TaskDataset(task, "test", batch_size=16),
                                                batch_size=None))
        self.assertEqual(len(data), 4)
        b = task.batch("test", range(16))
        self.assertTrue(torch.equal(data[0]["inputs"], torch.from_numpy(b.inputs.copy())))
        self.assertTrue(torch.equal(data[0]["targets"], torch.from_numpy(b.targets)))
        gen = torch.Generator().manual_seed(0)
        logits = torch.randn(*data[0]["inputs"].shape[:2], task.classes, generator=gen)
        # the loss: mean cross entropy over the real frames only
        valid = b.valid
        lp = torch.log_softmax(logits, -1).numpy()
        want = -np.mean([lp[i, t, b.targets[i, t]] for i in range(16)
                         for t in range(valid.shape[1]) if valid[i, t]])
        self.assertAlmostEqual(loss(logits, data[0]).item(), want, places=5)
        # the element score: argmax of the softmax summed over the element's window
        p = torch.softmax(logits, -1).numpy()
        right = total = 0
        for i in range(16):
            for e in range(b.window_len.shape[1]):
                n = b.window_len[i, e]
                if n == 0:
                    continue
                s = b.window_start[i, e]
                right += int(p[i, s:s + n].sum(0).argmax() == b.targets[i, s])
                total += 1
        scores, real = element_scores(logits, data[0])
        self.assertEqual(int(real.sum()), total)
        self.assertEqual(int(scores.sum()), right)
        self.assertAlmostEqual(element_accuracy(logits, data[0]), right / total)


if __name__ == "__main__":
    unittest.main()
