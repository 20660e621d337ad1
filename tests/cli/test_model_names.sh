#!/bin/sh
# test_model_names.sh - the registry (src/layers/layers.def) is the one list of models:
#   (a) no model name is compared as a string outside src/layers/ and src/layers/registry.c: a
#       rule of one model is a field or hook of its layer type record (include/selectivbench/
#       model.h), not `strcmp(cfg->model, "s4")` somewhere else;
#   (b) the learning check (configs/checks/learning.yaml) takes its models from the registry
#       (values: [all]).
# (docs/models/README.md is compared with the registry by test_docs_models.)
# usage: test_model_names.sh SOURCE_DIR
SRC=$1
failures=0
names=$(sed -n 's/^SB_LAYER(\([a-z0-9_]*\))$/\1/p' "$SRC/src/layers/layers.def")
if [ -z "$names" ]; then
  echo "FAIL: no SB_LAYER line in $SRC/src/layers/layers.def" >&2
  exit 1
fi

# (a) strcmp, strncmp, strcasecmp ... with a model's name as a literal argument
for n in $names; do
  hits=$(grep -rnE "str(n)?(case)?cmp\([^;]*\"$n\"" "$SRC/src" "$SRC/include" |
         grep -v "^$SRC/src/layers/" | grep -v "^$SRC/src/layers/registry.c:")
  if [ -n "$hits" ]; then
    echo "FAIL: the model name \"$n\" is compared as a string outside its layer file (make the" \
         "rule a field or hook of its sb_layer_type):" >&2
    echo "$hits" >&2
    failures=$((failures + 1))
  fi
done

# (b) the learning check runs the registry itself: its model values are [all] (expanded by
# the sweep loader to every registered model; test_sweep.sh checks the expansion)
yaml="$SRC/configs/checks/learning.yaml"
if ! sed -n '/^  model:/,/^  [a-z]/p' "$yaml" | grep -q 'values: *\[all\]'; then
  echo "FAIL: $yaml must take its models from the registry (model: values: [all])" >&2
  failures=$((failures + 1))
fi

if [ "$failures" -ne 0 ]; then
  exit 1
fi
echo "test_model_names: $(echo "$names" | wc -l) models, no name compared outside its layer file"
