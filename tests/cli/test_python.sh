#!/bin/sh
# test_python.sh - the Python binding's test suite (tests/python, python3 -m unittest) against
# this build's library and program; with example, examples/torch_model.py on a small task.
#
# usage: test_python.sh SOURCE_DIR LIBRARY PROGRAM [example]
#
# Debian's python3 with python3-numpy (installed by scripts/install-deps.sh test); skipped,
# with one line, without them. Under a sanitized build (SB_SANITIZE, ./run.sh asan) python3
# runs with the ASan runtime preloaded and leak detection on, so a leak in the library over
# the leak check's repeated batch calls (tests/python/leak_check.py) fails the test.
set -eu
src=$1
lib=$2
exe=$3
what=${4:-suite}

PY=${SB_PYTHON:-}
if [ -z "$PY" ]; then
  # Debian's interpreter first: its numpy and torch are the packages the set-up installs
  for p in /usr/bin/python3 python3; do
    if command -v "$p" >/dev/null 2>&1; then PY=$p; break; fi
  done
fi
if [ -z "$PY" ] || ! "$PY" -c 'import numpy' >/dev/null 2>&1; then
  echo "skipped: python3-numpy not installed (scripts/install-deps.sh test installs it)"
  exit 0
fi
if [ "$what" = example ] && ! "$PY" -c 'import torch' >/dev/null 2>&1; then
  echo "skipped: python3-torch not installed (the example trains a PyTorch LSTM)"
  exit 0
fi

export PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}"
export SELECTIVBENCH_LIBRARY="$lib" SELECTIVBENCH_CLI="$exe"
export PYTHONDONTWRITEBYTECODE=1 OMP_WAIT_POLICY=PASSIVE
# py ARGS: the interpreter, with the sanitizer runtimes under a sanitized build (only python3:
# other programs the script runs would report their own leaks). The interpreter's own heap
# reads as leaked to LSan at exit, so leaks are checked by tests/python/leak_check.py alone.
preload=""
if [ "${SB_SANITIZED:-0}" = 1 ]; then
  preload="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
fi
py() {
  if [ -n "$preload" ]; then
    LD_PRELOAD="$preload" ASAN_OPTIONS="detect_leaks=0:halt_on_error=1" "$PY" "$@"
  else
    "$PY" "$@"
  fi
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "$what" = example ]; then
  # a smaller task than the example's default: under a minute on 2 cores
  py "$src/examples/torch_model.py" --out "$tmp/demo" --dataset_size 3000 \
    --epoch_size 1500 >"$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
  cat "$tmp/out"
  grep -q "beats the window-1 observer" "$tmp/out"
  grep -q "torch_lstm" "$tmp/demo/report/report.md"
  "$exe" results --db "$tmp/demo/selectivbench.db" | grep -q torch_lstm
  echo "example ok"
else
  cd "$tmp"
  py -m unittest discover -s "$src/tests/python" -v 2>&1
  # pip install ./python into a virtual environment, offline, from a copy of the folder (pip
  # writes build files next to setup.py); the installed package loads this build's library
  if [ -z "$preload" ] && "$PY" -c 'import ensurepip' >/dev/null 2>&1; then
    cp -r "$src/python" "$tmp/python"
    mkdir -p "$tmp/build" && cp "$lib" "$tmp/build/libselectivbench.so.0"
    "$PY" -m venv --system-site-packages "$tmp/venv" >/dev/null
    "$tmp/venv/bin/pip" install --no-index --no-cache-dir -q "$tmp/python" >"$tmp/pip.log" 2>&1 ||
      { cat "$tmp/pip.log"; echo "pip install ./python failed"; exit 1; }
    (cd / && env -u PYTHONPATH -u SELECTIVBENCH_LIBRARY "$tmp/venv/bin/python" -c '
import os, selectivbench as sb
assert "site-packages" in sb.__file__, sb.__file__
assert os.path.exists(os.path.join(os.path.dirname(sb.__file__), "libselectivbench.so.0"))
t = sb.Task(amb=3, grammar_scale=True, train_seqlen_max=5, dataset_size=10)
print("pip install ./python: ok (library %s, %d inputs)" % (sb.library_version(), t.inputs))')
  else
    echo "pip install ./python: not checked (python3-venv missing, or a sanitized build)"
  fi
  if [ -n "$preload" ]; then
    LD_PRELOAD="$preload" ASAN_OPTIONS="detect_leaks=1:halt_on_error=1" \
      LSAN_OPTIONS="log_path=$tmp/lsan" SB_LSAN_LOG="$tmp/lsan" \
      "$PY" "$src/tests/python/leak_check.py"
  fi
fi
