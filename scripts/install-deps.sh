#!/bin/sh
# Installs the Debian 12 packages selectivbench needs, if any are missing.
# Runs apt-get as root, or through sudo for a user. Does nothing when all are present.
#
#   scripts/install-deps.sh          what the build and `selectivbench demo` need (gcc)
#   scripts/install-deps.sh test     and what the test suite needs beyond them: chromium, for
#                                    the dashboard's browser test (about 110 MB to download,
#                                    360 MB installed), python3 with numpy for the Python
#                                    binding's tests, and python3-torch for its PyTorch part
#                                    and the bring-your-own-model example (with its
#                                    dependencies a few hundred MB: `./run.sh test` only, not
#                                    the demo; the binding itself needs only python3-numpy),
#                                    Open MPI for the mpirun tests (docs/cluster.md), and
#                                    clang-format for the formatting check (test_format)
#   scripts/install-deps.sh clang    and clang with its OpenMP (`./run.sh clang`)
#   scripts/install-deps.sh fuzz     and libFuzzer with clang's sanitizer runtimes
#                                    (`./run.sh fuzz`; about 300 MB, so only on request)
#   scripts/install-deps.sh cluster  and a single-node Slurm with munge, for the real Slurm
#                                    test (`./run.sh test-cluster`; tests/cluster/; the test
#                                    starts and stops the daemons itself, nothing is enabled)
set -eu

PACKAGES="gcc make cmake pkg-config libc6-dev libgomp1 libopenblas-openmp-dev \
libjansson-dev libcmocka-dev libsqlite3-dev libyaml-dev \
libcairo2-dev fonts-dejavu-core libfftw3-dev libmicrohttpd-dev libdnnl-dev"
# headless Chromium loads `selectivbench serve`'s page in tests/cli/test_browser.sh; the
# Python binding's tests (tests/cli/test_python.sh) use Debian's python3, numpy and torch
# Open MPI for the mpirun sweep and data-parallel tests (tests/cli/test_mpi*.sh)
TEST_PACKAGES="chromium python3 python3-numpy python3-venv python3-torch libopenmpi-dev openmpi-bin clang-format"
CLANG_PACKAGES="clang clang-14 libomp-14-dev"
# slurm-wlm brings slurmctld, slurmd and the client commands (sbatch, squeue, scontrol,
# scancel, sinfo) with its basic plugins; munge is its authentication. Debian's packages start
# their daemons with systemd where there is one: the test runs its own, with its own
# configuration, ports and munge socket, and leaves those alone.
CLUSTER_PACKAGES="slurm-wlm munge"
case "${1:-}" in
  "") ;;
  test) PACKAGES="$PACKAGES $TEST_PACKAGES" ;;
  clang) PACKAGES="$PACKAGES $CLANG_PACKAGES" ;;
  # libclang_rt.fuzzer and clang's ASan/UBSan runtimes are in libclang-rt-14-dev, only
  # recommended by clang-14 (not installed with --no-install-recommends)
  fuzz) PACKAGES="$PACKAGES $CLANG_PACKAGES libclang-rt-14-dev" ;;
  cluster) PACKAGES="$PACKAGES $CLUSTER_PACKAGES" ;;
  *)
    echo "usage: scripts/install-deps.sh [test|clang|fuzz|cluster]" >&2
    exit 2
    ;;
esac

missing=""
for p in $PACKAGES; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
[ -z "$missing" ] && exit 0

echo "selectivbench: installing Debian packages:$missing"
if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1; then
  SUDO="sudo"
else
  echo "selectivbench: error: packages$missing are missing and neither root nor sudo is" \
       "available; install them with apt-get as root" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing
