#!/bin/sh
# test_cli.sh - the command line: outputs, thread independence, exports, and every bad
# input we handle (one clear error line on stderr, a non-zero exit, no crash).
#
# usage: test_cli.sh PATH/TO/selectivbench DATA_DIR
set -u
SB=$1
. "$(dirname "$0")/common.sh"

# ---- bad input: impossible grammars --------------------------------------------------
expect_error 2 "--amb 42" grammar --vocab 41 --amb 42
expect_error 2 "--amb_depth 0" grammar --amb_depth 0
expect_error 2 "--vocab 60" grammar --vocab 60 --amb 3
expect_error 2 "grammar_scale" grammar --grammar_scale True --amb 60
expect_error 2 "states" grammar --vocab 4 --amb 0 --amb_depth 1
# refused at once, not after 100000 attempts: the flags that fix it, with values that work
expect_error 2 "raise --transition_density" grammar --vocab 6 --amb 0 --amb_depth 1 --transition_density 0
expect_error 2 "can be generated in practice: .*; use --amb_depth 19 or less, or --amb 7 or more" \
  grammar --amb 4
# ---- bad input: malformed and out-of-range flags ---------------------------------------
expect_error 2 "not an integer" grammar --amb abc
expect_error 2 "not an integer" grammar --amb 1.5
expect_error 2 "out of range" grammar --seed -1
expect_error 2 "out of range" grammar --seed 4294967296
expect_error 2 "not a boolean" grammar --grammar_scale maybe
expect_error 2 "unknown flag --bogus" grammar --bogus 1
expect_error 2 "needs a value" data --seed
expect_error 2 "unexpected argument" data --seed 1 2
expect_error 2 "out of range" data --threads -1
expect_error 2 "not one of" data --split validation
expect_error 2 "not one of" data --protocol strict
expect_error 2 "--train_seqlen_max 1" data --train_seqlen_max 1
expect_error 2 "--train_seqlen_min" data --train_seqlen_min 300
expect_error 2 "--gap_prob" data --gap_prob 2
expect_error 2 "--train_gap_min" data --train_gap_min 2 --train_gap_max 1
expect_error 2 "--train_noise" data --train_noise -0.5
expect_error 2 "not a finite number" data --train_noise nan
# the learning rate's range and its message agree: one rule (the key table's), both ends
expect_error 2 "--lr 101 is out of range" train --lr 101
expect_error 2 "--lr 0 is out of range" train --lr 0
expect_error 2 "--wd 200 is out of range" train --wd 200
expect_ok train --lr 100 --only_createset
expect_error 2 "--dataset_size" data --dataset_size 0
expect_error 2 "--samples" data --samples 5-2 --json
expect_error 2 "outside the split" data --samples 0-300000 --json
expect_error 2 "--samples" data --json
expect_error 2 "base_set" data --base_set gsc
expect_error 2 "unknown command" frobnicate
# did you mean: a typo close to one known name (<= 2 edits, or a unique prefix) names it
expect_error 2 "unknown command 'trian'; did you mean 'train'?" trian
expect_error 2 "unknown command 'swe'; did you mean 'sweep'?" swe
# hints name the program as it was run, so that they paste into the same shell
expect_error 2 "unknown command 'frobnicate'; run '$SB --help'" frobnicate
expect_error 2 "did you mean 'train'? (run '$SB --help' for the list)" trian
expect_error 2 "name the checkpoint first, a run id or a file: $SB eval RUN|CKPT \[flags\]" eval --test_dur 1
expect_error 2 "unknown flag --sed; did you mean --seed?" grammar --sed 1
expect_error 2 "unknown flag --lrr; did you mean --lr?" train --lrr 1
expect_error 2 "unknown flag --worker; did you mean --workers?" sweep tiny/task2 --worker 2
expect_error 2 "unknown flag --zzzzzz; see --help for the list" train --zzzzzz 1
expect_error 2 "--split: 'tset' is not one of: train, test, valid; did you mean 'test'?\$" data --split tset
expect_error 2 "--optimizer: 'adan' is not one of: adam, adamw; did you mean 'adam'?\$" \
  train --optimizer adan
# a tie (adamx is one edit from adam and from adamw) suggests nothing
expect_error 2 "--optimizer: 'adamx' is not one of: adam, adamw\$" train --optimizer adamx
expect_error 2 "--model: 'glaa' is not one of: .*; did you mean 'gla'?\$" \
  results --db "$TMP/none.db" --model glaa
expect_error 2 "unknown --model 'glaa'; did you mean 'gla'? ($SB models lists them)" \
  train --model glaa
# bench's model is checked by the library, which does not know how the program was run
expect_error 2 "unknown --model 'glaa'; did you mean 'gla'? (the models command lists them)" \
  bench --model glaa --steps 1
expect_error 2 "--models: unknown model 'mamb'; did you mean 'mamba'?" demo --models mamb
expect_error 2 "no sweep file or preset 'tiny/tsk2'; did you mean the preset 'tiny/task2'?" \
  sweep tiny/tsk2 --dry_run
expect_error 2 "in sweep file 'tiny/task2'; did you mean model=gla?\$" \
  sweep tiny/task2 --dry_run --filter model=glaa
expect_error 2 "train_seqlen_max, warmup_steps); did you mean 'model'?\$" \
  sweep tiny/task2 --dry_run --filter modle=gla
expect_error 2 "--filter 'model=glaa': unknown model 'glaa'; did you mean 'gla'?" \
  results --db "$TMP/none.db" --filter model=glaa
expect_error 2 "'modle' is not a configuration key; did you mean 'model'?" \
  results --db "$TMP/none.db" --filter modle=gla
expect_error 2 "unknown --model" bench --model nosuch --steps 1
# ---- bad input: unwritable outputs -----------------------------------------------------
expect_error 1 "export folder" data --vocab 9 --amb 8 --amb_depth 8 --dataset_size 10 \
  --test_size 5 --train_seqlen_max 20 --test_seqlen_max 20 --export /dev/null/sub
touch "$TMP/a_file"
expect_error 1 "not a folder" data --vocab 9 --amb 8 --amb_depth 8 --dataset_size 10 \
  --test_size 5 --train_seqlen_max 20 --test_seqlen_max 20 --export "$TMP/a_file"
expect_error 1 "--dot" grammar --dot /dev/null/g.dot

# ---- outputs ---------------------------------------------------------------------------
expect_ok grammar --vocab 5 --amb 2 --amb_depth 2 --seed 1
grep -q "TE           0.849126876403" "$TMP/out" || fail "grammar summary: TE line missing"
grep -q "B0   -> D B1 #" "$TMP/out" || fail "grammar summary: transition list missing"

expect_ok grammar --vocab 5 --amb 2 --amb_depth 2 --seed 1 --dot "$TMP/g.dot"
grep -q '"B0" -> "D"' "$TMP/g.dot" || fail "--dot: edge B0 -> D missing"

# the same checksum for 1 and 2 threads (sequences, gaps, distractors)
small="--vocab 12 --amb 3 --amb_depth 4 --train_seqlen_max 60 --dataset_size 4000 \
--train_gap_max 1.0 --grammar_gap True --gap_prob 0.5 --gap_start 5"
# shellcheck disable=SC2086
expect_ok data $small --checksum --threads 1
c1=$(awk '/^checksum/ {print $2}' "$TMP/out")
# shellcheck disable=SC2086
expect_ok data $small --checksum --threads 2
c2=$(awk '/^checksum/ {print $2}' "$TMP/out")
[ -n "$c1" ] && [ "$c1" = "$c2" ] || fail "checksum differs between 1 and 2 threads: $c1 $c2"

# --show prints gaps
expect_ok data --vocab 12 --amb 3 --amb_depth 4 --train_seqlen_max 40 --train_gap_max 1.0 \
  --show 2
grep -q "^sample 1 (train" "$TMP/out" || fail "--show: no sample 1"
grep -q " _[0-9]" "$TMP/out" || fail "--show: no visible gaps"

# --export writes the reference's folder: one line per sample, index order
expect_ok data --vocab 5 --amb 2 --amb_depth 2 --seed 1 --train_seqlen_max 20 \
  --test_seqlen_max 20 --dataset_size 7 --test_size 3 --export "$TMP/ds"
for f in train test transitions config.yaml; do
  [ -s "$TMP/ds/$f" ] || fail "--export: $f missing"
done
[ "$(wc -l <"$TMP/ds/train")" -eq 7 ] || fail "--export: train should have 7 lines"
[ "$(wc -l <"$TMP/ds/test")" -eq 3 ] || fail "--export: test should have 3 lines"
first="[3, 1, 1, 1, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 3, 1, 0]::['C', 'A1', 'A1', 'A1', \
'#', 'A0', 'B1', '#', 'A0', 'B1', '#', 'A0', 'B1', '#', 'A0', 'B1', '#', 'C', 'A1', '#']::20"
[ "$(head -n 1 "$TMP/ds/train")" = "$first" ] || fail "--export: first training line differs"
grep -qx "B0, D, 0.3333333333333333" "$TMP/ds/transitions" || fail "--export: transitions"
ls -a "$TMP/ds" | grep -q '\.tmp$' && fail "--export: temporary file left behind"

# ---- ceiling: the ideal observer ---------------------------------------------------------
small_task="--vocab 9 --amb 8 --amb_depth 4 --train_seqlen_max 30 --test_seqlen_max 30 \
--dataset_size 300 --test_size 40"
# shellcheck disable=SC2086
expect_ok ceiling $small_task --json
for key in '"expected_acc":' '"realized_acc":' '"window_acc":{"0":' '"1":' '"2":' '"4":' \
  '"8":' '"16":' '"32":' '"n_elements":1200'; do
  grep -q -- "$key" "$TMP/out" || fail "ceiling --json lacks $key: $(cat "$TMP/out")"
done
# shellcheck disable=SC2086
expect_ok ceiling $small_task
grep -q "expected_acc" "$TMP/out" && grep -q "no model can beat this" "$TMP/out" ||
  fail "ceiling table: $(cat "$TMP/out")"
# shellcheck disable=SC2086
expect_ok ceiling $small_task --grammar_gap True --gap_prob 0.5 --gap_start 3
grep -q "told which frames are distractors" "$TMP/out" && grep -q "bayes_model_acc" "$TMP/out" ||
  fail "ceiling task 3 note missing"
# the same numbers on 1 and 2 threads
# shellcheck disable=SC2086
expect_ok ceiling $small_task --json --threads 1
j1=$(sed 's/"seconds":[^}]*//' "$TMP/out")
# shellcheck disable=SC2086
expect_ok ceiling $small_task --json --threads 2
j2=$(sed 's/"seconds":[^}]*//' "$TMP/out")
[ "$j1" = "$j2" ] || fail "ceiling differs between 1 and 2 threads: $j1 / $j2"
# a train command line is a ceiling command line: every train flag is accepted but train's
# own bookkeeping (the results database, retraining, the NaN test aid, progress lines,
# periodic checkpoints)
"$SB" train --help | grep -o -- '^  --[a-z_0-9]*' | grep -v -e '--db$' -e '--force$' \
  -e '--inject_nan_at$' -e '--progress_every$' -e '--checkpoint_every$' | sort >"$TMP/train_flags"
"$SB" ceiling --help | grep -o -- '^  --[a-z_0-9]*' | sort >"$TMP/ceiling_flags"
missing=$(comm -23 "$TMP/train_flags" "$TMP/ceiling_flags")
[ -s "$TMP/train_flags" ] && [ -z "$missing" ] || fail "ceiling lacks train flags: $missing"
# shellcheck disable=SC2086
expect_error 2 "has 40 samples" ceiling $small_task --samples 41
# shellcheck disable=SC2086
expect_error 2 "--prior_samples" ceiling $small_task --prior_samples 301
expect_error 2 "--amb 42" ceiling --vocab 41 --amb 42
expect_error 2 "not one of" ceiling --split validation
# shellcheck disable=SC2086
expect_error 2 "length table" ceiling --vocab 41 --amb 40 --amb_depth 999 \
  --train_seqlen_max 100000 --test_seqlen_max 100000 --test_size 1 --dataset_size 1

# ---- training, evaluation, checkpoints ----------------------------------------------------
tiny="--vocab 9 --amb 8 --grammar_scale True --train_seqlen_max 20 --test_seqlen_max 20 \
--dataset_size 96 --test_size 12 --batch_size 16 --test_bs 6 --feat_size 16 --layers 1 \
--epoch_size 48 --results $TMP/res"
# shellcheck disable=SC2086
expect_error 2 "unknown --model 'nosuch'; available: transformer, gru" train $tiny --model nosuch
# shellcheck disable=SC2086
expect_error 2 "not a finite number" train $tiny --lr abc
# shellcheck disable=SC2086
expect_error 2 "--batch_size 2" train $tiny --batch_size 2
# shellcheck disable=SC2086
expect_error 2 "960" train $tiny --model transformer --feat_size 960
# shellcheck disable=SC2086
expect_error 2 "out of range" train $tiny --dropout 1.5
# shellcheck disable=SC2086
expect_error 2 "unknown flag --nosuch" train $tiny --nosuch 3
expect_error 1 "cannot create the results folder" train --results /dev/null/x --dataset_size 64
# shellcheck disable=SC2086
expect_error 1 "no checkpoint" train $tiny --model gru --test_pretrained
# shellcheck disable=SC2086
expect_error 3 "diverged" train $tiny --model gru --seed 9 --inject_nan_at 3

# shellcheck disable=SC2086
expect_ok train $tiny --model gru --json
grep -q '"status":"finished"' "$TMP/out" || fail "train --json: no finished status: $(cat "$TMP/out")"
grep -q '"test_acc":0\.' "$TMP/out" || fail "train --json: no test_acc"
ckpt=$(sed -n 's/.*"checkpoint":"\([^"]*\)".*/\1/p' "$TMP/out")
[ -s "$ckpt" ] || fail "train: no checkpoint at '$ckpt'"
# the database has the run; running it again reports it instead of training
# shellcheck disable=SC2086
expect_ok train $tiny --model gru
grep -q "already finished" "$TMP/out" || fail "train again: not reported as finished"
# shellcheck disable=SC2086
expect_ok train $tiny --model gru --force --quiet
# task 4: evaluate the trained configuration at longer test gaps
# shellcheck disable=SC2086
expect_ok train $tiny --model gru --test_pretrained --test_dur 0.5 --json
grep -q '"status":"finished"' "$TMP/out" || fail "test_pretrained: not finished"
expect_ok eval "$ckpt" --test_dur 1.0 --dump "$TMP/dump.safetensors"
grep -q "gaps of 1 s" "$TMP/out" || fail "eval --test_dur: $(cat "$TMP/out")"
[ -s "$TMP/dump.safetensors" ] || fail "eval --dump wrote nothing"
# bad checkpoints
expect_error 1 "No such file" eval "$TMP/nosuch.safetensors"
head -c 100 "$ckpt" >"$TMP/corrupt.safetensors"
expect_error 1 "corrupt" eval "$TMP/corrupt.safetensors"
expect_error 2 "another model" eval "$ckpt" --model transformer
expect_error 2 "shape" eval "$ckpt" --feat_size 32
expect_error 2 "name the checkpoint" eval --test_dur 1
# bench validates, then times
expect_ok bench --model transformer --batch_size 4 --frames 16 --feat_size 16 --layers 1 \
  --inp 9 --classes 11 --steps 2 --json
grep -q '"tokens_per_s"' "$TMP/out" || fail "bench --json: no tokens_per_s"
# which instruction sets ran: the build's, the CPU's and OpenBLAS's kernels (no timings)
isa='"isa":{"built_level":"[a-z0-9.]*","built":"[a-z0-9. ]*","native":\(true\|false\),'
grep -q "$isa"'"cpu_level":' "$TMP/out" || fail "bench --json: no isa object: $(head -c 400 "$TMP/out")"
expect_ok bench --model gru --batch_size 2 --frames 8 --feat_size 16 --layers 1 --inp 9 \
  --classes 11 --steps 1
grep -q '^instruction set: built for [a-z0-9.]* (SB_NATIVE=O[NF]*, [^)]*): [a-z]' "$TMP/out" ||
  fail "bench: no 'instruction set: built for' line: $(head -n 3 "$TMP/out")"
grep -q '^instruction set: this CPU has .*; OpenBLAS .* kernels' "$TMP/out" ||
  fail "bench: no 'instruction set: this CPU has' line: $(head -n 3 "$TMP/out")"

# --no_peak measures no roofline: the header says so and % peak reads -; --gemm_rates
# prints the configuration's own shapes (rows = batch x frames)
expect_ok bench --model gru --batch_size 2 --frames 8 --feat_size 16 --layers 1 --inp 9 \
  --classes 11 --steps 1 --no_peak --gemm_rates --gemm openblas
grep -q '^peaks not measured (--no_peak)' "$TMP/out" || fail "bench --no_peak: no header line"
grep -q '^FP32 peak' "$TMP/out" && fail "bench --no_peak measured the FP32 peak"
grep -q '^  16x11x16: openblas [0-9]' "$TMP/out" || fail "bench --gemm_rates: no decoder shape"
grep -q '^  16x16x16: openblas [0-9]' "$TMP/out" || fail "bench --gemm_rates: no projection shape"
grep -q '^gru .* - ' "$TMP/out" || fail "bench --no_peak: % peak is not -: $(tail -n 1 "$TMP/out")"

# the demo (the README's first command) runs: a quick version with one model and seed
expect_ok demo --quick --models transformer --seeds 1 --out "$TMP/demo"
grep -q "topological entropy 2.776" "$TMP/out" || fail "demo: paper grammar TE missing"
grep -q "| transformer |" "$TMP/out" || fail "demo: no results table"
grep -q "^sample 0 (train" "$TMP/out" && grep -q "^sample 1 (train" "$TMP/out" ||
  fail "demo: the two task-2 samples are not shown"
[ -s "$TMP/demo/report/fig2a_d32.png" ] || fail "demo: no figure"
# the demo's Next: lines paste whole: the program as it was run, then a shell comment
next=$(sed -n '/^Next:/,$p' "$TMP/out" | tail -n +2)
[ "$(echo "$next" | grep -c "^   $SB [a-z]")" -eq 4 ] ||
  fail "demo: the 4 Next: lines do not start with the program as run ($SB): $next"
for sub in results train; do
  hint=$(echo "$next" | grep "^   $SB $sub ")
  sh -c "$hint" >"$TMP/paste.out" 2>&1 || fail "demo: the hint '$hint' does not run: $(cat "$TMP/paste.out")"
done
grep -q "^   $SB results --db $TMP/demo/selectivbench.db   # " "$TMP/out" ||
  fail "demo: no hint for the results of its database: $next"
# curves by default (issue 38): every demo run has 10 or more points, and the figures draw them
expect_ok results --curves --db "$TMP/demo/selectivbench.db" --csv
fewest=$(awk -F, 'NR > 1 && $4 == "test" {n[$1]++} END {m = -1; for (r in n) if (m < 0 || n[r] < m) m = n[r]; print m}' "$TMP/out")
[ "$fewest" -ge 10 ] || fail "demo: a run with $fewest points on its learning curve"
ls "$TMP/demo/report/"*_curves.png >/dev/null 2>&1 || fail "demo: no learning-curve figure"
expect_error 2 "unknown model 'nosuch'" demo --models transformer,nosuch --out "$TMP/demo2"

# results --csv: a header with the configuration keys and the metrics, one row per run
expect_ok results --db "$TMP/demo/selectivbench.db" --json
n_json=$(grep -o '"hash"' "$TMP/out" | wc -l)
expect_ok results --db "$TMP/demo/selectivbench.db" --csv
head -1 "$TMP/out" | grep -q "model" || fail "results --csv: no model column: $(head -1 "$TMP/out")"
head -1 "$TMP/out" | grep -q "test_acc" || fail "results --csv: no test_acc column"
n_csv=$(($(wc -l <"$TMP/out") - 1))
[ "$n_json" -ge 1 ] && [ "$n_csv" -eq "$n_json" ] ||
  fail "results --csv: $n_csv rows for $n_json runs"
# a results folder stands for the database in it (DIR/selectivbench.db), with or without /
expect_ok results "$TMP/demo" --json
n_dir=$(grep -o '"hash"' "$TMP/out" | wc -l)
[ "$n_dir" -eq "$n_json" ] || fail "results DIR: $n_dir runs, --db finds $n_json"
expect_ok results --db "$TMP/demo/" --json
n_dir=$(grep -o '"hash"' "$TMP/out" | wc -l)
[ "$n_dir" -eq "$n_json" ] || fail "results --db DIR/: $n_dir runs, the file has $n_json"
mkdir -p "$TMP/no_db_here"
expect_error 1 "$TMP/no_db_here/selectivbench.db" results "$TMP/no_db_here"
expect_ok report "$TMP/demo" --out "$TMP/report_of_dir"
[ -s "$TMP/report_of_dir/report.md" ] || fail "report DIR: no report.md"
# --x KEY: one figure of every run against a configuration key (a scale study's)
expect_ok report "$TMP/demo" --x amb --out "$TMP/report_x"
[ -s "$TMP/report_x/scale_amb.png" ] && [ -s "$TMP/report_x/scale_amb_memory.png" ] ||
  fail "report --x amb: no scale_amb figures: $(ls "$TMP/report_x")"
grep -q "^## Accuracy vs amb (scale_amb)" "$TMP/report_x/report.md" ||
  fail "report --x amb: no section in report.md"
ls "$TMP/report_x" | grep -q '^fig2a' && fail "report --x amb drew the paper's figures too"
n_all=$(grep -o '^[0-9]* runs read' "$TMP/out" | cut -d' ' -f1)
# --filter: only the matching runs, figures and findings alike
expect_ok report "$TMP/demo" --x amb --filter model=gru --out "$TMP/report_none"
grep -q '^0 runs read, 0 used' "$TMP/out" || fail "report --filter model=gru read runs: $(cat "$TMP/out")"
expect_ok report "$TMP/demo" --filter model=transformer --out "$TMP/report_tf"
grep -q "^$n_all runs read" "$TMP/out" || fail "report --filter model=transformer: $(cat "$TMP/out") (all: $n_all)"
expect_error 2 "--x 'nosuch' is not a configuration key" report "$TMP/demo" --x nosuch
expect_error 1 "no results database at '$TMP/no_db_here/selectivbench.db'" report "$TMP/no_db_here"

# the data-generation benchmark runs on a small task and reports every stage
expect_ok bench data --vocab 5 --amb 2 --amb_depth 2 --train_seqlen_max 20 --dataset_size 200
grep -q '^instruction set: built for ' "$TMP/out" || fail "bench data: no instruction set line"
for stage in sequences samples batches; do
  grep -q "^$stage " "$TMP/out" || fail "bench data: no '$stage' line"
done

# train on a terminal: a live progress line rewritten in place (step, loss, accuracy,
# tokens/s, ETA); into a file: no carriage returns. The header names the grammar built
# (--grammar_scale: vocab amb + 1, depth amb).
tiny_train="train --model gru --vocab 9 --amb 8 --grammar_scale True --train_seqlen_max 20
  --test_seqlen_max 20 --dataset_size 640 --test_size 40 --batch_size 16 --feat_size 16
  --layers 1"
if command -v script >/dev/null 2>&1; then
  checks=$((checks + 1))
  script -qec "$SB $(echo $tiny_train) --results $TMP/tty" /dev/null >"$TMP/tty.out" 2>&1 ||
    fail "train in a pseudo-terminal failed: $(cat "$TMP/tty.out")"
  tr '\r' '\n' <"$TMP/tty.out" |
    grep -E -q '^  progress: step [0-9]+/[0-9]+ \([0-9]+ samples\): loss [0-9.]+ acc [0-9.]+ .* tok/s, ETA ' ||
    fail "train on a terminal: no live progress line: $(cat -v "$TMP/tty.out" | head -c 600)"
fi
expect_ok $tiny_train --results "$TMP/plain"
grep -q "$(printf '\r')" "$TMP/out" && fail "train into a file wrote carriage returns"
grep -q "task vocab 9 amb 8 depth 8," "$TMP/out" ||
  fail "train header: the effective grammar is not shown: $(head -1 "$TMP/out")"

# every registered model benches, trains on a tiny task (with its evaluations) and its
# checkpoint evaluates with longer test gaps
all_models=$("$SB" train --model nosuch 2>&1 | sed -n 's/.*available: //p' | tr -d ',')
[ -n "$all_models" ] || fail "no model list in the unknown-model error"
for m in $all_models; do
  expect_ok bench --model "$m" --batch_size 2 --frames 16 --feat_size 32 --layers 1 --inp 9 \
    --classes 11 --steps 1 --json
  grep -q '"tokens_per_s"' "$TMP/out" || fail "bench --model $m: no tokens_per_s"
  expect_ok train --model "$m" --vocab 5 --amb 4 --grammar_scale True --train_seqlen_max 10 \
    --test_seqlen_max 10 --dataset_size 64 --test_size 8 --batch_size 16 --feat_size 32 \
    --layers 1 --results "$TMP/all" --json
  grep -q '"status":"finished"' "$TMP/out" || fail "train --model $m did not finish"
  ck=$(grep -o '"checkpoint":"[^"]*"' "$TMP/out" | cut -d'"' -f4)
  expect_ok eval "$ck" --test_dur 0.5
  grep -q "test acc" "$TMP/out" || fail "eval of the $m checkpoint: $(cat "$TMP/out")"
done

# every command takes --threads N
for c in grammar data demo bench train ceiling models sweep results report; do
  expect_ok $c --threads 1 --help
  grep -q -- "--threads" "$TMP/out" || fail "$c --help does not list --threads"
done

# every command's --help exits 0 and lists its flags with their defaults (eval and probe
# take no checkpoint for it and list train's flags, which override the checkpoint's)
for pair in grammar:--amb data:--split demo:--models bench:--frames train:--lr \
  ceiling:--prior_samples eval:--test_dur eval:--dump probe:--section probe:--feat_size \
  models:--d_state sweep:--workers results:--filter report:--out; do
  c=${pair%%:*}
  flag=${pair#*:}
  expect_ok "$c" --help
  grep -q -- "^  $flag " "$TMP/out" || fail "$c --help does not list $flag"
  grep -q "(default" "$TMP/out" || fail "$c --help shows no defaults"
done
expect_ok eval --help
grep -q "^  --feat_size N .*(default 256)" "$TMP/out" || fail "eval --help: train's defaults missing"
grep -q "checkpoint's recorded configuration replaces them" "$TMP/out" ||
  fail "eval --help: does not say the checkpoint's configuration replaces the defaults"

echo "$checks CLI checks, $failures failures"
[ "$failures" -eq 0 ]
