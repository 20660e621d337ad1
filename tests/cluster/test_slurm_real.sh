#!/bin/sh
# test_slurm_real.sh - the sbatch script of `sweep FILE --slurm DIR` on a real single-node
# Slurm (issue 21, item 4), started and stopped by this test (`./run.sh test-cluster`):
#   - its own munged (a fresh key, its own socket) and a one-node slurm.conf in a temporary
#     folder (this host, its CPUs and memory from `slurmd -C`, no cgroups, no accounting,
#     JobRequeue=1), slurmctld and slurmd on their own ports (slurmd again with cgroup/v1
#     named when the cgroup plugin it detects cannot start, as in a container);
#   1. a tiny grid as an array of 2 tasks: the printed sbatch line submitted as it is, the
#      array waited for, the shard databases merged: every run finished exactly once, with
#      the test and train metrics of `sweep FILE --workers 1` run here;
#   2. preemption: each task of an array of 2 gets SIGUSR1 mid-run, what Slurm sends ahead
#      of --time (--signal=B:USR1@N): task 0 in its batch shell only (scancel --batch), task
#      1 in every process (scancel --full); each checkpoints, exits 75 and requeues itself,
#      Slurm starts it again, it resumes and finishes with metrics and checkpoints
#      byte-identical to the uninterrupted sweep;
#   3. (SB_CLUSTER_TIMELIMIT=1, about 3 minutes more) --time 1, so Slurm itself warns the
#      task 12 s ahead of its limit, at least once: requeued, resumed, identical;
#   every daemon it started is stopped and the folder removed, whatever happens.
# Needs root (or passwordless sudo), munge and slurm-wlm (scripts/install-deps.sh cluster);
# otherwise it prints one "skipped:" line and exits 77 (SB_CLUSTER_NO_SUDO=1, as under ctest:
# never sudo). Gives up after SB_CLUSTER_TIMEOUT
# seconds (default 600, 900 with part 3; parts 1 and 2 take about 2 minutes on 2 cores). SB_CLUSTER_KEEP=1 keeps the folder for a look; SB_CLUSTER_HOLD=S
# leaves the started Slurm to you for S seconds before the checks (its SLURM_CONF printed).
#
# usage: test_slurm_real.sh PATH/TO/selectivbench SOURCE_DIR
set -u
if [ $# -ne 2 ]; then
  echo "usage: $0 PATH/TO/selectivbench SOURCE_DIR" >&2
  exit 2
fi
SB=$(realpath "$1")
SRC=$(realpath "$2")
SELF=$(realpath "$0")
LIMIT=${SB_CLUSTER_TIMEOUT:-$([ -n "${SB_CLUSTER_TIMELIMIT:-}" ] && echo 900 || echo 600)}
PATH=$PATH:/usr/sbin:/sbin # slurmctld, slurmd and munged live there
export PATH

skip() {
  echo "skipped: $*"
  exit 77
}

# root, or the same test again through sudo
if [ "$(id -u)" -ne 0 ]; then
  if [ -z "${SB_CLUSTER_NO_SUDO:-}" ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    exec sudo -n env "PATH=$PATH" "SB_CLUSTER_TIMEOUT=$LIMIT" "SB_CLUSTER_KEEP=${SB_CLUSTER_KEEP:-}" \
      "SB_CLUSTER_HOLD=${SB_CLUSTER_HOLD:-}" "SB_CLUSTER_TIMELIMIT=${SB_CLUSTER_TIMELIMIT:-}" \
      sh "$SELF" "$SB" "$SRC"
  fi
  skip "a real Slurm needs root (or passwordless sudo) to start munged, slurmctld and slurmd"
fi
for tool in munged munge slurmctld slurmd sbatch sinfo squeue scontrol scancel; do
  command -v "$tool" >/dev/null 2>&1 ||
    skip "$tool not installed (scripts/install-deps.sh cluster installs slurm-wlm and munge)"
done
# the whole test under a watchdog: SIGTERM after LIMIT seconds runs the clean-up below
if [ -z "${SB_CLUSTER_WATCHED:-}" ]; then
  SB_CLUSTER_WATCHED=1 exec timeout --foreground -k 30 "$LIMIT" sh "$SELF" "$SB" "$SRC"
fi

TMP=$(mktemp -d /tmp/sb-slurm.XXXXXX)
chmod 755 "$TMP" # munged wants every folder above its socket searchable by all
failures=0
say() { echo "test_slurm_real: $*"; }
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
# the end: a message, the logs when something failed, the clean-up (the EXIT trap)
die() {
  fail "$*"
  exit 1
}

# ---- the clean-up: jobs, slurmd, slurmctld, munged, the folder ----------------------------
host=$(hostname -s)
munged_pid=""
ctld_pid=""
slurmd_pid=""
stop_pid() { # stop_pid PID NAME: SIGTERM, then SIGKILL after 10 s
  [ -n "$1" ] || return 0
  kill "$1" 2>/dev/null || return 0
  i=0
  while kill -0 "$1" 2>/dev/null && [ $i -lt 100 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  if kill -0 "$1" 2>/dev/null; then
    echo "test_slurm_real: $2 (pid $1) ignored SIGTERM; killing it" >&2
    kill -9 "$1" 2>/dev/null
  fi
  wait "$1" 2>/dev/null
}
show_logs() {
  for f in "$TMP"/log/slurmctld.log "$TMP"/log/slurmd.log "$TMP"/*/logs/slurm-*.out; do
    [ -f "$f" ] || continue
    echo "---- last lines of $f" >&2
    tail -n 15 "$f" >&2
  done
}
cleanup() {
  rc=$?
  trap - EXIT INT TERM
  [ "$rc" -ne 0 ] || [ "$failures" -eq 0 ] || rc=1
  [ "$rc" -eq 0 ] || show_logs
  if [ -n "$ctld_pid" ] && kill -0 "$ctld_pid" 2>/dev/null; then
    # the jobs first, so that no slurmstepd outlives its slurmd
    jobs=$(squeue -h -o %A 2>/dev/null)
    # shellcheck disable=SC2086
    [ -z "$jobs" ] || scancel $jobs 2>/dev/null
    i=0
    while [ $i -lt 30 ] && { [ -n "$(squeue -h -o %A 2>/dev/null)" ] ||
      ls "$TMP/spool/${host}"_* >/dev/null 2>&1; }; do
      sleep 1
      i=$((i + 1))
    done
  fi
  stop_pid "$slurmd_pid" slurmd
  stop_pid "$ctld_pid" slurmctld
  stop_pid "$munged_pid" munged
  if [ -n "${SB_CLUSTER_KEEP:-}" ]; then
    say "kept $TMP"
  else
    rm -rf "$TMP"
  fi
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 143 ]; then
    echo "test_slurm_real: FAIL: stopped after the ${LIMIT} s time limit" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# wait_for SECONDS WHAT CMD...: runs CMD every second until it succeeds; fails after SECONDS.
wait_for() {
  wait_limit=$1
  wait_what=$2
  shift 2
  waited=0
  until "$@"; do
    waited=$((waited + 1))
    [ $waited -lt "$wait_limit" ] || {
      fail "timed out after $wait_limit s waiting for $wait_what"
      return 1
    }
    sleep 1
  done
  return 0
}

# ---- munged, slurm.conf, slurmctld, slurmd ------------------------------------------------
# nothing of a Slurm job this test may itself run in
for v in $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\)=.*/\1/p'); do
  unset "$v"
done
mkdir -m 700 "$TMP/munge"
mkdir -m 755 "$TMP/run" "$TMP/state" "$TMP/spool" "$TMP/log"
dd if=/dev/urandom of="$TMP/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 600 "$TMP/munge/munge.key"
sock=$TMP/run/munge.sock
munged -F --key-file="$TMP/munge/munge.key" --socket="$sock" --pid-file="$TMP/run/munged.pid" \
  --log-file="$TMP/munge/munged.log" --seed-file="$TMP/munge/munged.seed" \
  >"$TMP/log/munged.out" 2>&1 &
munged_pid=$!
munge_works() { munge -S "$sock" -n </dev/null 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1; }
wait_for 20 "munged" munge_works ||
  die "munged did not start: $(tail -n 3 "$TMP/munge/munged.log" "$TMP/log/munged.out" 2>/dev/null)"

node=$(slurmd -C 2>/dev/null | grep '^NodeName=') || die "slurmd -C printed no NodeName line"
cpus=$(echo "$node" | sed -n 's/.* CPUs=\([0-9]*\).*/\1/p')
# ports of our own, so that a Slurm already running here is left alone
port=$((20000 + $$ % 20000 * 2))
cat >"$TMP/slurm.conf" <<EOF
# one node, everything in $TMP (written by tests/cluster/test_slurm_real.sh)
ClusterName=sbtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# our munged; a requeued job waits cred_expire seconds before it may start again (120 s by
# default; 10 here to keep the test short)
AuthInfo=socket=$sock,cred_expire=10
StateSaveLocation=$TMP/state
SlurmdSpoolDir=$TMP/spool
SlurmctldPidFile=$TMP/run/slurmctld.pid
SlurmdPidFile=$TMP/run/slurmd.pid
SlurmctldLogFile=$TMP/log/slurmctld.log
SlurmdLogFile=$TMP/log/slurmd.log
PlugStackConfig=$TMP/plugstack.conf
# no cgroups: a container may have none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobRequeue=1
ReturnToService=2
KillWait=5
MinJobAge=900
$node NodeAddr=127.0.0.1
PartitionName=sbtest Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
: >"$TMP/plugstack.conf"
SLURM_CONF=$TMP/slurm.conf
export SLURM_CONF

slurmctld -D -c -f "$SLURM_CONF" >"$TMP/log/slurmctld.out" 2>&1 &
ctld_pid=$!
start_slurmd() {
  slurmd -D -f "$SLURM_CONF" -N "$host" >>"$TMP/log/slurmd.out" 2>&1 &
  slurmd_pid=$!
}
node_idle() {
  kill -0 "$ctld_pid" 2>/dev/null && kill -0 "$slurmd_pid" 2>/dev/null &&
    [ "$(sinfo -h -n "$host" -o %T 2>/dev/null)" = idle ]
}
idle_or_dead() { node_idle || ! kill -0 "$slurmd_pid" 2>/dev/null; }
start_slurmd
wait_for 60 "the node to be idle in sinfo" idle_or_dead
if ! kill -0 "$slurmd_pid" 2>/dev/null; then
  # slurmd 22.05 starts a cgroup plugin even when nothing uses cgroups (no proctrack or
  # task cgroup here), and the one it detects fails where cgroups are missing, read-only or
  # mixed (a container): cgroup/v1 asked for by name starts without any
  why=$(grep -m 1 'error:\|fatal:' "$TMP/log/slurmd.log" 2>/dev/null | sed 's/^\[[^]]*\] //')
  say "slurmd stopped at its start ($why); again with CgroupPlugin=cgroup/v1 in cgroup.conf"
  echo "CgroupPlugin=cgroup/v1" >"$TMP/cgroup.conf"
  wait "$slurmd_pid" 2>/dev/null
  start_slurmd
fi
wait_for 60 "the node to be idle in sinfo" node_idle ||
  die "Slurm did not come up: slurmctld $(kill -0 "$ctld_pid" 2>/dev/null && echo running || echo stopped), slurmd $(kill -0 "$slurmd_pid" 2>/dev/null && echo running || echo stopped)"
say "Slurm $(sinfo -V 2>/dev/null | sed 's/^slurm //') up: node $host idle, $cpus CPUs, partition sbtest (ports $port/$((port + 1)))"
if [ -n "${SB_CLUSTER_HOLD:-}" ]; then
  # to try things by hand: this Slurm for SB_CLUSTER_HOLD seconds, then the checks
  say "holding for $SB_CLUSTER_HOLD s: export SLURM_CONF=$SLURM_CONF"
  sleep "$SB_CLUSTER_HOLD"
fi

# ---- helpers on jobs and results -------------------------------------------------------
# submit DIR: runs the sbatch line that `sweep --slurm DIR` printed (in $TMP/gen.out) as it is;
# sets $job to the array's job id.
submit() {
  line=$(sed -n '/^submit it with:$/{n;p;}' "$TMP/gen.out" | sed 's/^ *//')
  [ "$line" = "sbatch $1/sweep.sbatch" ] || die "sweep --slurm printed no sbatch line for $1: $(cat "$TMP/gen.out")"
  say "$line"
  $line >"$TMP/sbatch.out" 2>&1 || die "'$line' failed: $(cat "$TMP/sbatch.out")"
  job=$(sed -n 's/^Submitted batch job \([0-9]*\)$/\1/p' "$TMP/sbatch.out")
  [ -n "$job" ] || die "sbatch printed no job id: $(cat "$TMP/sbatch.out")"
}
# array_done JOB: no task of the array is pending, running or completing
array_done() {
  q=$(squeue -h -j "$1" -o %i 2>/dev/null) || return 1
  [ -z "$q" ]
}
# task_field JOB_TASK KEY: a field of `scontrol show job` (JobState, ExitCode, Restarts, ...)
task_field() {
  scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}
# runs_of DB: "hash status test_acc test_loss train_acc train_loss attempts" per run, sorted
runs_of() {
  "$SB" results --db "$1" --json 2>/dev/null |
    grep -o '"hash":"[0-9a-f]*","status":"[a-z]*"\|"test_acc":[^,]*,"test_loss":[^,]*,"train_acc":[^,]*,"train_loss":[^,]*\|"attempts":[0-9]*' |
    paste -d' ' - - - | sed 's/"[a-z_]*"://g; s/"//g; s/,/ /g' | sort
}
# metrics_of DB: runs_of without the attempts
metrics_of() { runs_of "$1" | cut -d' ' -f1-6; }
# same_runs NAME MERGED DIRECT: the merged shards hold exactly the direct sweep's runs,
# each once, finished, with the same metrics
same_runs() {
  n=$(runs_of "$2" | wc -l)
  want=$(runs_of "$3" | wc -l)
  [ "$want" -gt 0 ] || fail "$1: the direct sweep recorded no runs"
  [ "$n" -eq "$want" ] || fail "$1: the merged shards hold $n runs, the direct sweep $want"
  [ "$(runs_of "$2" | cut -d' ' -f1 | sort -u | wc -l)" -eq "$n" ] ||
    fail "$1: a run is in the merged database more than once"
  bad=$(runs_of "$2" | awk '$2 != "finished"')
  [ -z "$bad" ] || fail "$1: runs not finished after the array: $bad"
  if [ "$(metrics_of "$2")" = "$(metrics_of "$3")" ]; then
    say "$1: $n runs finished exactly once, test and train metrics equal to sweep --workers 1:"
    metrics_of "$2" | sed 's/^/    /'
  else
    fail "$1: metrics differ from sweep --workers 1 run here:
merged:
$(metrics_of "$2")
direct:
$(metrics_of "$3")"
  fi
}

# ---- 1. a tiny grid as a job array of 2 -----------------------------------------------------
tiny=$SRC/tests/data/sweeps/tiny.yaml
"$SB" sweep "$tiny" --workers 1 --threads 1 --quiet --results "$TMP/direct1" >"$TMP/direct1.out" 2>&1 ||
  die "sweep $tiny --workers 1 failed: $(tail -n 3 "$TMP/direct1.out")"
"$SB" sweep "$tiny" --slurm "$TMP/arr" --array 2 --time 00:05:00 --cpus_per_task 1 >"$TMP/gen.out" 2>&1 ||
  die "sweep --slurm failed: $(cat "$TMP/gen.out")"
head -n 1 "$TMP/gen.out" | sed 's/^/test_slurm_real: /'
submit "$TMP/arr"
start=$(date +%s)
wait_for 180 "array job $job" array_done "$job" || exit 1
say "1: array job $job ended after $(($(date +%s) - start)) s"
for t in 0 1; do
  state=$(task_field "${job}_$t" JobState)
  code=$(task_field "${job}_$t" ExitCode)
  say "1: task ${job}_$t: $state, exit $code, $(runs_of "$TMP/arr/shard-$t/selectivbench.db" | wc -l) runs in shard-$t"
  { [ "$state" = COMPLETED ] && [ "$code" = 0:0 ]; } || fail "1: task ${job}_$t ended $state with exit $code"
done
"$SB" results merge "$TMP/arr/shard-0" "$TMP/arr/shard-1" --db "$TMP/arr/all/selectivbench.db" \
  >"$TMP/merge1.out" 2>&1 || fail "1: results merge failed: $(cat "$TMP/merge1.out")"
same_runs 1 "$TMP/arr/all/selectivbench.db" "$TMP/direct1/selectivbench.db"
once=$(runs_of "$TMP/arr/all/selectivbench.db" | awk '$7 != 1')
[ -z "$once" ] || fail "1: runs started more than once: $once"

# same_checkpoints NAME RESULTS... : every checkpoint file of the uninterrupted sweep in
# $TMP/direct2 (weights and optimiser state) is in one of the RESULTS folders, byte for byte
same_checkpoints() {
  name=$1
  shift
  n=0
  for ref in "$TMP"/direct2/checkpoints/*.safetensors; do
    base=$(basename "$ref")
    got=""
    for d in "$@"; do
      [ -f "$d/checkpoints/$base" ] && got=$d/checkpoints/$base
    done
    if [ -z "$got" ]; then
      fail "$name: no shard holds checkpoint $base"
    elif ! cmp -s "$ref" "$got"; then
      fail "$name: $got differs from the uninterrupted sweep's $base"
    else
      n=$((n + 1))
    fi
  done
  [ "$n" -gt 0 ] && say "$name: $n checkpoint files (weights, optimiser state) byte-identical to the uninterrupted sweep's"
}
# requeued NAME JOB_TASK SHARD_DIR RESTARTS: the task completed after RESTARTS requeues, each
# after the script's requeue line, and its run resumed from its checkpoint
requeued() {
  state=$(task_field "$2" JobState)
  code=$(task_field "$2" ExitCode)
  restarts=$(task_field "$2" Restarts)
  say "$1: task $2: $state, exit $code, restarts $restarts"
  { [ "$state" = COMPLETED ] && [ "$code" = 0:0 ]; } || fail "$1: task $2 ended $state with exit $code"
  out=$TMP/$3/logs/slurm-$2.out
  lines=$(grep -c "stopped with its checkpoints; requeueing it" "$out" 2>/dev/null)
  case "$4" in
    +) [ "${restarts:-0}" -ge 1 ] || fail "$1: task $2 was never requeued" ;;
    *) [ "$restarts" = "$4" ] || fail "$1: task $2 was restarted ${restarts:-?} times, want $4" ;;
  esac
  [ "${lines:-0}" = "${restarts:-0}" ] ||
    fail "$1: task $2 restarted $restarts times but its script requeued it $lines times: $(tail -n 5 "$out")"
  [ "${restarts:-0}" -eq 0 ] && return 0
  logs=$TMP/$3/shard-${2##*_}/logs
  grep -h 'interrupted at\|requeueing\|resuming at' "$out" "$logs"/*.log | sed 's/^/    /'
  grep -q 'resuming at update [1-9]' "$logs"/*.log ||
    fail "$1: the requeued task $2 did not resume its run from its checkpoint"
}
# evaluated JOB_TASK SHARD: the task runs and its run has evaluated (and so checkpointed)
evaluated() {
  [ "$(task_field "$1" JobState)" = RUNNING ] &&
    grep -q '^  step [0-9]*/[0-9]* (' "$2"/logs/*.log 2>/dev/null
}
step_of() { grep -h '^  step ' "$1"/logs/*.log | tail -n 1 | sed 's/^  step \([0-9/]*\).*/\1/'; }

# ---- 2. preemption: SIGUSR1, checkpoint, exit 75, requeue, resume ------------------------
# two GRU runs of about ten seconds each (evaluations every 5000 samples), one per task;
# SIGUSR1 to task 0's batch shell only (as --signal=B:USR1@N does), to every process of task 1
long=$TMP/long.yaml
sed -e 's/- 640$/- 240000/' -e 's/values: \[transformer, gru\]/values: [gru]/' "$tiny" >"$long"
"$SB" sweep "$long" --workers 1 --threads 1 --quiet --results "$TMP/direct2" >"$TMP/direct2.out" 2>&1 ||
  die "sweep $long --workers 1 failed: $(tail -n 3 "$TMP/direct2.out")"
"$SB" sweep "$long" --slurm "$TMP/pre" --array 2 --time 00:05:00 --cpus_per_task 1 >"$TMP/gen.out" 2>&1 ||
  die "sweep --slurm failed: $(cat "$TMP/gen.out")"
submit "$TMP/pre"
start=$(date +%s)
t=0
for how in --batch --full; do
  wait_for 120 "task ${job}_$t to evaluate" evaluated "${job}_$t" "$TMP/pre/shard-$t" || exit 1
  step=$(step_of "$TMP/pre/shard-$t")
  scancel --signal=USR1 "$how" "${job}_$t" || fail "2: scancel --signal=USR1 $how ${job}_$t failed"
  say "2: scancel --signal=USR1 $how ${job}_$t at step $step"
  t=$((t + 1))
done
wait_for 240 "array job $job" array_done "$job" || exit 1
say "2: array job $job ended after $(($(date +%s) - start)) s"
requeued 2 "${job}_0" pre 1
requeued 2 "${job}_1" pre 1
"$SB" results merge "$TMP/pre/shard-0" "$TMP/pre/shard-1" --db "$TMP/pre/all/selectivbench.db" \
  >"$TMP/merge2.out" 2>&1 || fail "2: results merge failed: $(cat "$TMP/merge2.out")"
same_runs 2 "$TMP/pre/all/selectivbench.db" "$TMP/direct2/selectivbench.db"
same_checkpoints 2 "$TMP/pre/shard-0" "$TMP/pre/shard-1"

# ---- 3. (SB_CLUSTER_TIMELIMIT=1) Slurm's own warning: --time 1 ---------------------------
# a one-minute limit, so warned 12 s ahead (--signal=B:USR1@12) and, Slurm looking at time
# limits every 30 s, somewhere 12 to 48 s into each start; a run of about a minute is
# requeued at least once by the warning alone and finishes, identical to the direct sweep
if [ -n "${SB_CLUSTER_TIMELIMIT:-}" ]; then
  slow=$TMP/slow.yaml
  sed -e 's/- 640$/- 1200000/' -e 's/values: \[transformer, gru\]/values: [gru]/' \
    -e 's/values: \[1, 2\]/values: [1]/' "$tiny" >"$slow"
  "$SB" sweep "$slow" --slurm "$TMP/lim" --array 1 --time 1 --cpus_per_task 1 >"$TMP/gen.out" 2>&1 ||
    die "sweep --slurm failed: $(cat "$TMP/gen.out")"
  grep -qxF '#SBATCH --signal=B:USR1@12' "$TMP/lim/sweep.sbatch" ||
    fail "3: --time 1 is not warned 12 s ahead: $(grep signal "$TMP/lim/sweep.sbatch")"
  submit "$TMP/lim"
  start=$(date +%s)
  # the uninterrupted run meanwhile, on the other core
  rm -rf "$TMP/direct2"
  "$SB" sweep "$slow" --workers 1 --threads 1 --quiet --results "$TMP/direct2" >"$TMP/direct3.out" 2>&1 &
  direct=$!
  wait_for 400 "array job $job" array_done "$job" || exit 1
  say "3: array job $job ended after $(($(date +%s) - start)) s"
  wait $direct || die "sweep $slow --workers 1 failed: $(tail -n 3 "$TMP/direct3.out")"
  requeued 3 "${job}_0" lim +
  same_runs 3 "$TMP/lim/shard-0/selectivbench.db" "$TMP/direct2/selectivbench.db"
  same_checkpoints 3 "$TMP/lim/shard-0"
fi

[ "$failures" -eq 0 ] && say "done: a real Slurm ran the arrays, requeued the warned tasks and resumed them"
echo "real slurm checks done, $failures failures"
[ "$failures" -eq 0 ]
