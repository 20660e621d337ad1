#!/bin/bash
# test_docs_commands.sh - the commands of README.md, docs/README.md and docs/cluster.md run as
# written (issue 38, item 5). Every line of their ``` blocks that is a command is run in
# order, each document in a fresh folder of its own (configs/, examples/, tools/ and python/
# linked from the repository, build/selectivbench and `selectivbench` on PATH this build),
# as a new user pasting them would; a command that exits non-zero, or runs past
# LIMIT_S seconds (a minute on a quiet machine, with room for a loaded test machine;
# stretched by the load average beyond the cores, at most 4-fold: limit_now), is a failure.
#
# What is not run as written, and why, is named per command in SKIP (with the test that
# covers it) and LIMIT (a sweep of many runs gets --limit 2: the command line is the
# documented one, cut to two runs). Placeholders: `<run>` is the newest run of the folder's
# database; `$i/$N` (a shard of N) is 0/21, two runs of lite task 2.
#
# usage: test_docs_commands.sh PATH/TO/selectivbench
set -u
SB=$1
. "$(dirname "$0")/common.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
# under AddressSanitizer (./run.sh asan) the same commands are tested by their own tests;
# this one checks the documents and would take the sanitizer's 3x for nothing
case "${ASAN_OPTIONS:-}" in *detect_leaks*) echo "SKIP: under AddressSanitizer"; exit 77 ;; esac
SB=$(cd "$(dirname "$SB")" && pwd)/$(basename "$SB")
mkdir -p "$TMP/bin"
ln -s "$SB" "$TMP/bin/selectivbench"
export PATH="$TMP/bin:$PATH" SB_CACHE_DIR="$TMP/cache" B=build/selectivbench i=0 N=21
LIMIT_S=120
# The limit on a busy machine: LIMIT_S stretched by the load beyond the cores (the load
# average of the last minute over the cores this process may use), at most 4-fold, so that
# a test run beside other work is not failed for waiting on the CPU.
limit_now() {
  local load cores
  load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)
  cores=$(nproc 2>/dev/null || echo 1)
  awk -v l="$load" -v c="$cores" -v s="$LIMIT_S" \
    'BEGIN { f = l / c; if (f < 1) f = 1; if (f > 4) f = 4; printf "%d", s * f }'
}

# SKIP: an extended regular expression on the command, then why it is not run here
SKIP=(
  '^\./run\.sh (demo|test)' 'the suite itself (./run.sh test runs this test)'
  '^\./run\.sh install' 'installs into the system: test_install installs into a folder'
  '^cc ' 'needs ./run.sh install: test_install builds examples/c against the installed copy'
  '^mpirun .*--hostfile' 'needs a cluster of 65 ranks: test_mpi_sweep runs MPI sweeps'
  '^mpirun -np 4 .*--feat_size 648' 'a width-648 run on 16 threads a rank: test_data_parallel'
  '^sbatch ' 'needs Slurm: ./run.sh test-cluster, test_slurm'
  'merge slurm/task2/shard-\*' 'needs the Slurm array to have run (sbatch)'
  'report --results slurm/task2/all' 'needs the Slurm array to have run (sbatch)'
  ' serve( |$)' 'serves until stopped: test_serve, test_browser'
  '^\$B bench$' 'times every model (about 5 minutes): test_cli runs bench --model gru'
  '--precision bf16$' 'a paper-size run (hours): test_bf16'
  'task1_complexity.yaml --shard 0/4' 'paper-size runs (hours each): test_sweep_cli'
  'plan configs/paper/' 'calibrates paper-size shapes (minutes): test_plan_cli'
  '^tools/plan_table\.py' 'plans every grid (minutes): test_plan_cli'
  '^export ' 'sets the environment for the next lines (applied here)'
  'examples/torch_model\.py' 'trains an LSTM in PyTorch: test_python_example runs it'
)
# LIMIT: sweeps of many runs, run with --limit 2
LIMIT='^(\$B|selectivbench) sweep configs/lite/task2\.yaml --(workers|shard)'

have_numpy=0
python3 -c 'import numpy' >/dev/null 2>&1 && have_numpy=1

# commands DOC: the command lines of DOC's ``` blocks, one per line as "LINE<TAB>COMMAND"
# (continuation lines joined, comments after the command and comment lines dropped)
commands() {
  awk '
    /^```/ { inb = !inb; next }
    !inb { next }
    {
      line = $0
      if (cont != "") { cmd = cmd " " line } else { cmd = line; at = NR }
      if (line ~ /\\$/) { sub(/\\$/, "", cmd); cont = 1; next }
      cont = ""
      sub(/^[ \t]+/, "", cmd)
      if (cmd == "" || cmd ~ /^#/) next
      # a comment after the command: " # " or "  # " outside quotes (none of ours quote #)
      sub(/[ \t]+#[ \t].*$/, "", cmd)
      gsub(/[ \t]+$/, "", cmd)
      if (cmd ~ /^(\$B|selectivbench|\.\/run\.sh|mpirun|sbatch|cc|python3|tools\/|export|B=)/)
        printf "%d\t%s\n", at, cmd
    }' "$1"
}

skip_reason() {
  local k
  for ((k = 0; k < ${#SKIP[@]}; k += 2)); do
    if [[ "$1" =~ ${SKIP[k]} ]]; then
      echo "${SKIP[k + 1]}"
      return 0
    fi
  done
  return 1
}

ran=0
skipped=0
for doc in README.md docs/README.md docs/cluster.md; do
  work="$TMP/work/$(echo "$doc" | tr '/.' '__')"
  mkdir -p "$work/build"
  for d in configs examples tools python; do ln -s "$root/$d" "$work/$d"; done
  ln -s "$SB" "$work/build/selectivbench"
  # the Python binding finds the library in build/, as in a clone after ./run.sh build
  [ -e "$(dirname "$SB")/libselectivbench.so.0" ] &&
    ln -s "$(dirname "$SB")/libselectivbench.so.0" "$work/build/libselectivbench.so.0"
  while IFS=$'\t' read -r at cmd; do
    where="$doc:$at"
    [[ "$cmd" == B=* ]] && continue # B is set above, to the same build/selectivbench
    if reason=$(skip_reason "$cmd"); then
      echo "skip $where: $cmd ($reason)"
      skipped=$((skipped + 1))
      continue
    fi
    if [[ "$cmd" == python3* && $have_numpy -eq 0 ]]; then
      echo "skip $where: $cmd (no numpy here: test_python_suite runs the binding where it is)"
      skipped=$((skipped + 1))
      continue
    fi
    run=$cmd
    if [[ "$run" == *"<run>"* ]]; then
      id=$("$SB" results --db "$work/results/selectivbench.db" --json 2>/dev/null |
        grep -o '"hash":"[0-9a-f]*"' | tail -n 1 | cut -d'"' -f4)
      [ -n "$id" ] || { fail "$where: no run in the folder for <run>: $cmd"; continue; }
      run=${run//<run>/$id}
    fi
    [[ "$run" =~ $LIMIT ]] && run="$run --limit 2"
    checks=$((checks + 1))
    ran=$((ran + 1))
    t0=$SECONDS
    limit=$(limit_now)
    (cd "$work" && PYTHONPATH="$work/python" timeout "$limit" bash -c "$run") \
      >"$TMP/cmd.out" 2>"$TMP/cmd.err"
    rc=$?
    echo "ran  $where ($((SECONDS - t0)) s of at most $limit, exit $rc): $run"
    if [ $rc -eq 124 ]; then
      fail "$where: '$cmd' ran past $limit s (name it in SKIP with its reason, or shorten it)"
    elif [ $rc -ne 0 ]; then
      fail "$where: '$cmd' exited $rc: $(tail -n 3 "$TMP/cmd.err")"
    fi
  done < <(commands "$root/$doc")
done
[ $ran -ge 30 ] || fail "only $ran commands ran: the extraction missed the documents' blocks"
echo "docs commands: $ran run, $skipped skipped (named above), $failures failures"
[ "$failures" -eq 0 ]
