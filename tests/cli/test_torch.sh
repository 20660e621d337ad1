#!/bin/sh
# test_torch.sh - checkpoints between selectivbench and the PyTorch RecNet, both ways
# (tools/torch_roundtrip.py: a trained checkpoint loads strictly into the RecNet and gives
# the same logits; torch's state_dict loads into `selectivbench eval` and gives the same
# test loss and accuracy, and after torch changes the weights, torch's logits).
#
# Needs torch and numpy: $SB_PYTHON if set, else the first of python3 and /usr/bin/python3
# that imports both (Debian: apt-get install python3-torch). Without them it prints a single
# "skipped:" line and exits 0 (ctest shows the test as skipped). The RecNet is the reference's when
# SB_REFERENCE_MODELS names its models/ssm_models.py (gru, transformer, s4), else the GRU
# RecNet written from the spec (tools/torch_recnet.py).
#
# usage: test_torch.sh PATH/TO/selectivbench SOURCE_DIR      (./run.sh test-torch)
set -u
SB=$1
SRC=$2

python=
for py in ${SB_PYTHON:-python3 /usr/bin/python3}; do
  if "$py" -c 'import torch, numpy' >/dev/null 2>&1; then
    python=$py
    break
  fi
done
if [ -z "$python" ]; then
  echo "skipped: python3-torch not installed (apt-get install python3-torch)"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -n "${SB_REFERENCE_MODELS:-}" ]; then
  if [ ! -f "$SB_REFERENCE_MODELS" ]; then
    echo "FAIL: SB_REFERENCE_MODELS=$SB_REFERENCE_MODELS is not a file (the reference's models/ssm_models.py)" >&2
    exit 1
  fi
  "$python" "$SRC/tools/torch_roundtrip.py" "$SB" "$work" "$SB_REFERENCE_MODELS"
else
  "$python" "$SRC/tools/torch_roundtrip.py" "$SB" "$work"
fi
