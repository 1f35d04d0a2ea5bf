#!/usr/bin/env bash
# groundtruth_preempt.sh: preemption is not failure (issue 19). A real `mpiexec -n 2 itertime calibrate
# groundtruth` of a tiny job is signalled while a configuration is in flight, then resumed:
#   groundtruth_preempt        SIGTERM to mpiexec (what Slurm's preemption or `scontrol requeue` does):
#                              --resume measures the configuration again and records it ok;
#   groundtruth_preempt_twice  SIGTERM twice in a row while the same configuration is in flight: the next
#                              --resume records it failed ("interrupted twice"), and --retry-failed
#                              measures it again: the new row supersedes the old (3 rows in the table,
#                              2 read), and a further --resume measures nothing;
#   groundtruth_crash          SIGKILL to rank 0 (no signal it can journal, as an out-of-memory kill): the
#                              next --resume records the configuration failed, as before the journal;
#                              --retry-failed without --resume is refused.
# The configuration is held in flight by the test hook ITERTIME_TEST_HOLD_IN_FLIGHT_S
# (calibrate/groundtruth.hpp), which prints the held key and rank 0's pid on stderr.
#
#   groundtruth_preempt.sh MPIEXEC "MPIEXEC_FLAGS" ITERTIME SOURCE_DIR READ_ROWS CASE
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
take_args "MPIEXEC MPIEXEC_FLAGS ITERTIME SOURCE_DIR READ_ROWS CASE" "$@"
probe_quiet

WORK="$(mktemp -d)"
OUT="$WORK/stdout"
ERR="$WORK/stderr"
HELD=""  # the key the hook held in flight
LAUNCHED=""  # pid of a background mpiexec, killed on exit if still there
cleanup() {
  if [[ -n "$LAUNCHED" ]] && kill -0 "$LAUNCHED" 2>/dev/null; then kill -KILL "$LAUNCHED" 2>/dev/null; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

cat >"$WORK/job.json" <<JOB
{"name": "preempt", "model": "$SOURCE_DIR/data/models/tiny-llama-gqa.json", "backend": "cpu", "ranks": 2,
 "groundtruth": {"warmup_iters": 1, "timed_iters": 2, "rounds": 1, "max_extra_rounds": 0, "min_timed_seconds": 0},
 "configs": [
  {"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 2, "seq_len": 16, "precision": "fp32"},
  {"dp": 2, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 2, "seq_len": 16, "precision": "fp32"}]}
JOB
GT=(calibrate groundtruth --job "$WORK/job.json" -o gt.h5)

# mpi ARGS...: itertime ARGS on 2 ranks in the working folder.
mpi() {
  (cd "$WORK" && "$MPIEXEC" "${QUIET[@]}" -n 2 "${MPIEXEC_FLAGS[@]}" "$ITERTIME" "$@" >"$OUT" 2>"$ERR")
  STATUS=$?
}

# held SIGNAL TARGET ARGS...: itertime ARGS on 2 ranks with the first round held in flight; once the hook
# says so, SIGNAL goes to TARGET (mpiexec or rank0); waits for the job to end.
held() {
  local signal="$1" target="$2"
  shift 2
  : >"$ERR"
  (cd "$WORK" && exec "$MPIEXEC" "${QUIET[@]}" -n 2 "${MPIEXEC_FLAGS[@]}" -x ITERTIME_TEST_HOLD_IN_FLIGHT_S=60 \
    "$ITERTIME" "$@" >"$OUT" 2>"$ERR") &
  LAUNCHED=$!
  local line="" i
  for ((i = 0; i < 600; ++i)); do
    line="$(grep -m1 'test hook: holding' "$ERR" 2>/dev/null)" && break
    kill -0 "$LAUNCHED" 2>/dev/null || break
    sleep 0.1
  done
  if [[ -z "$line" ]]; then
    fail "the hook never held a configuration in flight"
    kill -KILL "$LAUNCHED" 2>/dev/null
  else
    HELD="$(sed -E 's/.*holding (.*) in flight for .*/\1/' <<<"$line")"
    local pid
    pid="$(sed -E 's/.*\(pid ([0-9]+)\).*/\1/' <<<"$line")"
    if [[ $target == mpiexec ]]; then kill "-$signal" "$LAUNCHED"; else kill "-$signal" "$pid"; fi
  fi
  wait "$LAUNCHED"
  STATUS=$?
  LAUNCHED=""
  [[ $STATUS -ne 0 ]] || fail "the signalled job exited 0"
}

# The statuses read_rows prints: "key status" per row, raw (every row) or as readers see them.
raw_rows() { "$READ_ROWS" groundtruth "$WORK/gt.h5" | cut -f1,2; }
read_rows() { "$READ_ROWS" groundtruth-recipes "$WORK/gt.h5" | cut -f1,2; }
M="tiny-llama-gqa"
A="$M/dp1-tp1-pp1/mbs1/gbs2/seq16/fp32"
B="$M/dp2-tp1-pp1/mbs1/gbs2/seq16/fp32"
other_of() { if [[ $1 == "$A" ]]; then echo "$B"; else echo "$A"; fi; }

case_groundtruth_preempt() {
  held TERM mpiexec "${GT[@]}"
  grep -qxF "key $HELD" "$WORK/gt.h5.inflight" 2>/dev/null || fail "the journal does not name $HELD"
  grep -qxF "interrupted by signal 15" "$WORK/gt.h5.inflight" || fail "the journal does not record SIGTERM"
  mpi "${GT[@]}" --resume
  expect_status 0
  [[ ! -s "$ERR" ]] || fail "stderr is not empty on success"
  expect_stdout "# $HELD was in flight when the previous run was interrupted (1 in a row): measured again"
  expect_stdout "# 2 measured, 0 skipped, 0 failed, 0 already present"
  [[ "$(read_rows)" == "$A	ok
$B	ok" ]] || fail "rows: $(read_rows)"
  [[ ! -e "$WORK/gt.h5.inflight" ]] || fail "the journal outlived a clean run"
}

case_groundtruth_preempt_twice() {
  held TERM mpiexec "${GT[@]}"
  local first="$HELD"
  held TERM mpiexec "${GT[@]}" --resume
  [[ "$HELD" == "$first" ]] || fail "the second run held $HELD, not $first"
  grep -qxF "prior_interruptions 1" "$WORK/gt.h5.inflight" || fail "the journal does not carry the first interruption"
  mpi "${GT[@]}" --resume
  expect_status 0
  expect_stdout "# 1 measured, 0 skipped, 1 failed, 0 already present"
  local other
  other="$(other_of "$HELD")"
  "$READ_ROWS" groundtruth "$WORK/gt.h5" | grep -P "^\Q$HELD\E\tfailed\tfailed: interrupted twice in a row while being measured \(likely out of memory or a crash on another rank\); see its log; --retry-failed measures it again\t" >/dev/null ||
    fail "the twice-interrupted row: $("$READ_ROWS" groundtruth "$WORK/gt.h5" | cut -f1-3)"
  [[ "$(read_rows)" == "$HELD	failed
$other	ok" ]] || fail "rows after the third run: $(read_rows)"

  mpi "${GT[@]}" --resume --retry-failed
  expect_status 0
  [[ ! -s "$ERR" ]] || fail "stderr is not empty on success"
  expect_stdout "# 1 recorded failed, measured again (--retry-failed)"
  expect_stdout "# 1 measured, 0 skipped, 0 failed, 1 already present"
  # Append-only: the old row stays, the new one after it wins for every reader.
  [[ "$(raw_rows)" == "$HELD	failed
$other	ok
$HELD	ok" ]] || fail "raw rows after --retry-failed: $(raw_rows)"
  [[ "$(read_rows)" == "$other	ok
$HELD	ok" ]] || fail "rows as read after --retry-failed: $(read_rows)"

  mpi "${GT[@]}" --resume
  expect_status 0
  expect_stdout "# 0 measured, 0 skipped, 0 failed, 2 already present"
  [[ "$(raw_rows | wc -l)" -eq 3 ]] || fail "a resume after --retry-failed added rows: $(raw_rows)"
}

case_groundtruth_crash() {
  held KILL rank0 "${GT[@]}"
  mpi "${GT[@]}" --resume
  expect_status 0
  expect_stdout "# 1 measured, 0 skipped, 1 failed, 0 already present"
  "$READ_ROWS" groundtruth "$WORK/gt.h5" |
    grep -P "^\Q$HELD\E\tfailed\tfailed: the previous run died while measuring this configuration \(out of memory or a crash\)" >/dev/null ||
    fail "the crashed configuration's row: $("$READ_ROWS" groundtruth "$WORK/gt.h5" | cut -f1-3)"
  # Refused before anything is opened; one process is enough (MPI singleton), and quicker than mpiexec.
  (cd "$WORK" && "$ITERTIME" "${GT[@]}" --retry-failed >"$OUT" 2>"$ERR")
  STATUS=$?
  expect_status 2
  expect_stderr "itertime: error: --retry-failed measures again what a file already holds: use it with --resume"
}

case "$CASE" in
  groundtruth_preempt | groundtruth_preempt_twice | groundtruth_crash) "case_$CASE" ;;
  *) echo "unknown case $CASE" >&2; exit 64 ;;
esac
if [[ $failures -gt 0 ]]; then
  echo "$CASE: $failures failure(s)" >&2
  exit 1
fi
echo "$CASE: ok"
