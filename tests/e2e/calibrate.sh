#!/usr/bin/env bash
# calibrate.sh: end-to-end tests of `itertime calibrate comm` and `itertime calibrate groundtruth`
# (training techniques from job files included), run for real through mpiexec, with the HDF5 contents
# read back by read_rows (tests/e2e/read_rows.cpp), `itertime inspect` and, when present, h5dump.
#
#   calibrate.sh MPIEXEC "MPIEXEC_FLAGS" ITERTIME SOURCE_DIR READ_ROWS CORRUPT_LIB CASE...
#
# MPIEXEC_FLAGS are extra mpiexec flags (e.g. --oversubscribe), CORRUPT_LIB the PMPI interposer built
# from corrupt_allreduce.c. Each case runs in a fresh temporary folder, removed afterwards. As root,
# Open MPI needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 in the environment (CTest
# sets them). mpiexec runs with --quiet where it has it (Open MPI 4; Open MPI 5's prterun refuses the
# option) so that stderr holds only what itertime writes.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
take_args "MPIEXEC MPIEXEC_FLAGS ITERTIME SOURCE_DIR READ_ROWS CORRUPT_LIB CASE..." "$@"
probe_quiet

# mpi N [-x VAR=VALUE ...] -- ARGS...: runs itertime ARGS on N ranks in the working folder.
mpi() {
  local ranks="$1"
  shift
  local extra=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do
    extra+=("$1")
    shift
  done
  shift
  (cd "$WORK" && "$MPIEXEC" "${QUIET[@]}" -n "$ranks" "${MPIEXEC_FLAGS[@]}" "${extra[@]}" "$ITERTIME" "$@" >"$OUT" 2>"$ERR")
  STATUS=$?
  # Without --quiet (Open MPI 5) the launcher boxes its own reports between lines of dashes: drop them.
  if [[ ${#QUIET[@]} -eq 0 ]]; then sed -i '/^-\{20,\}$/,/^-\{20,\}$/d' "$ERR"; fi
}

rows() { "$READ_ROWS" comm "$WORK/$1"; }

# read_rows_of FILE N: FILE's rows (as `rows` prints them) into $ROWS; fails unless there are exactly N.
read_rows_of() {
  ROWS="$(rows "$1")" || fail "read_rows comm $1 failed"
  [[ "$(wc -l <<<"$ROWS")" -eq "$2" ]] || fail "$1 holds $(wc -l <<<"$ROWS") rows, expected $2"
}

# The keys the small sweep (8 .. 64K by 8 at 2 ranks, every collective and dtype) must produce, written
# out from the nccl-tests size rules: all sizes are multiples of element size x group size, so every
# labelled size is the requested one. 5 sizes x 7 collectives x 4 dtypes = 140.
SMALL_SWEEP=(--min-bytes 8 --max-bytes 64K --step-factor 8 --iters 3 --warmup 1)
# The cases that do not test the outside-load judgement (comm_outside_load does) do not measure their
# stretches again for load: CTest runs them beside other tests, and each retry waits up to 10 s for a
# quiet moment (these cases took 35 to 105 s that way, their sweeps a few seconds).
NO_LOAD_RETRY=(--outside-load-cores 100)
small_sweep_keys() {
  local c d s
  for c in all_reduce all_gather reduce_scatter broadcast all_to_all send sendrecv; do
    for d in fp32 fp16 bf16 int8; do
      for s in 8 64 512 4096 32768; do echo "$c/$d/g2/consecutive/latency/$s"; done
    done
  done
}

# check_comm_rows FILE ITERS WARMUP: every row checked clean, with ITERS samples that are its own (the
# row's min/max equal its samples' min/max), min <= median <= max, positive times, MPI backend,
# intra-node span, and busbw/algbw equal to the collective's factor.
check_comm_rows() {
  local file="$1" iters="$2" warmup="$3" dump
  dump="$(rows "$file")" || fail "read_rows comm $file failed (bad offsets?)"
  awk -F'\t' -v iters="$iters" -v warmup="$warmup" '
    function factor(c, n) {
      if (c == "all_reduce") return 2 * (n - 1) / n
      if (c == "all_gather" || c == "reduce_scatter" || c == "all_to_all") return (n - 1) / n
      return 1
    }
    {
      split($1, k, "/"); n = substr(k[3], 2)
      if ($2 != 0) { print "row " NR " (" $1 "): check_errors " $2; bad++ }
      if ($3 != warmup || $4 != iters || $6 != iters) { print "row " NR " (" $1 "): warmup/iters/samples " $3 "/" $4 "/" $6; bad++ }
      if (!($7 > 0 && $7 <= $8 && $8 <= $9)) { print "row " NR " (" $1 "): times min/median/max " $7 "/" $8 "/" $9; bad++ }
      if ($10 != $7 || $11 != $9) { print "row " NR " (" $1 "): samples range " $10 ".." $11 " is not the row min/max " $7 ".." $9; bad++ }
      if ($12 != "intra-node" || $13 != "mpi" || $14 != "latency") { print "row " NR " (" $1 "): span/backend/mode " $12 "/" $13 "/" $14; bad++ }
      if ($15 != k[6]) { print "row " NR ": bytes " $15 " differ from the key"; bad++ }
      want = $17 * factor(k[1], n); diff = $18 - want; if (diff < 0) diff = -diff
      if (diff > 1e-9 * (want + 1e-12)) { print "row " NR " (" $1 "): busbw " $18 ", want " want; bad++ }
      if ($16 < 1) { print "row " NR " (" $1 "): count " $16; bad++ }
      algbw = $15 / ($8 * 1e3); diff = $17 - algbw; if (diff < 0) diff = -diff
      if ($17 <= 0 || diff > 1e-9 * algbw) { print "row " NR " (" $1 "): algbw " $17 " is not bytes/median " algbw; bad++ }
    }
    END { exit bad > 0 }' <<<"$dump" >"$WORK/.check" || fail "rows of $file: $(head -n 5 "$WORK/.check")"
  # Row offsets tile the samples array: consecutive, no gaps, no overlap.
  local expected_offsets
  expected_offsets="$(awk -F'\t' '{ print (NR - 1) * $6 }' <<<"$dump")"
  [[ "$(cut -f5 <<<"$dump")" == "$expected_offsets" ]] || fail "samples offsets of $file are not consecutive"
}

# ---- cases ------------------------------------------------------------------------------------

case_comm_sweep() {
  mpi 2 -- calibrate comm -o comm.h5 "${NO_LOAD_RETRY[@]}" "${SMALL_SWEEP[@]}"
  expect_status 0
  [[ ! -s "$ERR" ]] || fail "stderr is not empty on success"
  expect_stdout "2 ranks on 1 node(s), backend mpi, mode latency, 140 points"
  expect_stdout "# 140 points measured, 0 already present, 140 of 140 in comm.h5; 0 failed their check"
  [[ "$(grep -c '^  [0-9]*/140 .* ok$' "$OUT")" -eq 140 ]] || fail "stdout does not show 140 point lines ending in ok"
  read_rows_of comm.h5 140
  local dump="$ROWS"
  diff <(cut -f1 <<<"$dump" | sort) <(small_sweep_keys | sort) >"$WORK/.diff" ||
    fail "the keys in comm.h5 are not the 140 expected ones: $(head -n 10 "$WORK/.diff")"
  check_comm_rows comm.h5 3 1
  [[ "$("$READ_ROWS" comm-samples "$WORK/comm.h5")" -eq 420 ]] || fail "/comm/samples_us does not hold 140 x 3 samples"

  (cd "$WORK" && "$ITERTIME" inspect --fields comm.h5 >"$WORK/.inspect" 2>&1) || fail "itertime inspect failed"
  grep -qE '^  /comm/points +140 rows +compound' "$WORK/.inspect" || fail "inspect does not list /comm/points with 140 rows: $(cat "$WORK/.inspect")"
  grep -qE '^  /comm/samples_us +420 rows +float64' "$WORK/.inspect" || fail "inspect does not list /comm/samples_us with 420 rows"
  grep -qF 'collective, dtype, group_size, layout, span, mode, backend, bytes, count' "$WORK/.inspect" || fail "inspect --fields lacks the /comm/points fields"
  grep -qE '^  comm_world_size +2$' "$WORK/.inspect" || fail "inspect lacks comm_world_size 2"

  if command -v h5dump >/dev/null; then
    h5dump -H -d /comm/points "$WORK/comm.h5" >"$WORK/.h5dump" 2>&1 || fail "h5dump -H failed"
    grep -qF 'DATASPACE  SIMPLE { ( 140 ) / ( H5S_UNLIMITED ) }' "$WORK/.h5dump" || fail "h5dump does not see 140 rows: $(cat "$WORK/.h5dump")"
    grep -qF '"time_us_median"' "$WORK/.h5dump" || fail "h5dump does not see the field time_us_median"
  fi
}

case_comm_four_ranks() {
  # Group sizes 2 and 4 at 4 ranks: g2 in both layouts, g4 consecutive only (the strided group of the
  # whole world is the same group), sendrecv only at g2, and all_gather fp32 at 8 bytes skipped at g4
  # (8 / (4 x 4) = 0 elements per rank). Sizes 8, 64, 512:
  # g2: 2 layouts x 3 collectives x 2 dtypes x 3 sizes = 36; g4: 2 x 2 x 3 - 1 = 11. Total 47.
  mpi 4 -- calibrate comm -o four.h5 "${NO_LOAD_RETRY[@]}" --collectives all_reduce,all_gather,sendrecv --dtypes fp32,bf16 \
    --min-bytes 8 --max-bytes 512 --step-factor 8 --iters 2 --warmup 0
  expect_status 0
  expect_stdout "4 ranks on 1 node(s), backend mpi, mode latency, 47 points"
  expect_stdout "group size 2, strided layout (2 groups at once, intra-node); first group: ranks 0 2"
  expect_stdout "group size 4, consecutive layout (1 groups at once, intra-node); first group: ranks 0 1 2 3"
  read_rows_of four.h5 47
  local dump="$ROWS"
  [[ "$(cut -f1 <<<"$dump" | sort -u | wc -l)" -eq 47 ]] || fail "duplicate keys in four.h5"
  [[ "$(grep -c '/g2/strided/' <<<"$dump")" -eq 18 ]] || fail "expected 18 g2 strided rows"
  [[ "$(grep -c '/g2/consecutive/' <<<"$dump")" -eq 18 ]] || fail "expected 18 g2 consecutive rows"
  [[ "$(grep -c '/g4/consecutive/' <<<"$dump")" -eq 11 ]] || fail "expected 11 g4 consecutive rows"
  ! grep -q '/g4/strided/\|^sendrecv/[^/]*/g4' <<<"$dump" || fail "g4 strided or g4 sendrecv rows present"
  ! grep -q '^all_gather/fp32/g4/consecutive/latency/8	' <<<"$dump" || fail "all_gather fp32 g4 at 8 bytes was measured"
  grep -q '^all_gather/bf16/g4/consecutive/latency/8	' <<<"$dump" || fail "all_gather bf16 g4 at 8 bytes missing"
  check_comm_rows four.h5 2 0
}

case_comm_resume() {
  mpi 2 -x ITERTIME_FAULT_ABORT_AFTER_POINTS=5 -- calibrate comm -o comm.h5 "${NO_LOAD_RETRY[@]}" "${SMALL_SWEEP[@]}"
  [[ $STATUS -ne 0 ]] || fail "the aborted run exited with status 0"
  expect_stderr "ITERTIME_FAULT_ABORT_AFTER_POINTS=5 reached"
  read_rows_of comm.h5 5  # the aborted file
  local before="$ROWS"
  [[ "$("$READ_ROWS" comm-samples "$WORK/comm.h5")" -eq 15 ]] || fail "the aborted file does not hold 5 x 3 samples"

  mpi 2 -- calibrate comm -o comm.h5 "${NO_LOAD_RETRY[@]}" --resume "${SMALL_SWEEP[@]}"
  expect_status 0
  expect_stdout "140 points (5 already in comm.h5, resuming)"
  expect_stdout "# 135 points measured, 5 already present, 140 of 140 in comm.h5; 0 failed their check"
  [[ "$(grep -c '^  [0-9]*/140 ' "$OUT")" -eq 135 ]] || fail "the resumed run did not print 135 point lines"
  read_rows_of comm.h5 140  # the resumed file
  local after="$ROWS"
  [[ "$(head -n 5 <<<"$after")" == "$before" ]] || fail "the first 5 rows changed:
$(diff <(echo "$before") <(head -n 5 <<<"$after"))"
  [[ -z "$(cut -f1 <<<"$after" | sort | uniq -d)" ]] || fail "duplicate keys: $(cut -f1 <<<"$after" | sort | uniq -d | head -n 3)"
  diff <(cut -f1 <<<"$after" | sort) <(small_sweep_keys | sort) >/dev/null || fail "the resumed file lacks some of the 140 keys"
  check_comm_rows comm.h5 3 1

  # Resuming a complete file measures nothing and changes no row.
  mpi 2 -- calibrate comm -o comm.h5 "${NO_LOAD_RETRY[@]}" --resume "${SMALL_SWEEP[@]}"
  expect_status 0
  expect_stdout "# 0 points measured, 140 already present"
  [[ "$(rows comm.h5)" == "$after" ]] || fail "a second --resume changed the rows"
}

case_comm_corrupt() {
  # The interposer damages the first fp32 all-reduce result (the untimed check of the first point) on
  # rank 1: the check must fail loudly, the row must record it, the sweep goes on, the exit status is 1.
  mpi 2 -x LD_PRELOAD="$CORRUPT_LIB" -x ITERTIME_TEST_CORRUPT_RANK=1 -- calibrate comm -o bad.h5 "${NO_LOAD_RETRY[@]}" \
    --collectives all_reduce --dtypes fp32 --min-bytes 8 --max-bytes 512 --step-factor 8 --iters 2 --warmup 1
  expect_status 1
  local key="all_reduce/fp32/g2/consecutive/latency/8"
  expect_stderr "itertime: CORRECTNESS CHECK FAILED for $key: FAILED: 1 wrong elements (rank 1 element 1: got 6.000000, want 1.000000)"
  expect_stderr "1 point(s) failed their correctness check"
  expect_stdout "1 failed their check"
  grep -q '^  1/3 .*FAILED: 1 wrong elements' "$OUT" || fail "the point line does not say FAILED"
  [[ "$(grep -c ' ok$' "$OUT")" -eq 2 ]] || fail "the other 2 points are not ok"
  read_rows_of bad.h5 3
  local dump="$ROWS"
  [[ "$(awk -F'\t' -v k="$key" '$1 == k { print $2 }' <<<"$dump")" == "1" ]] || fail "the row of $key does not carry check_errors 1"
  [[ "$(awk -F'\t' '$2 != 0' <<<"$dump" | wc -l)" -eq 1 ]] || fail "more than one row carries check errors"

  # The same on rank 0 (the report path without the rank-to-rank message).
  mpi 2 -x LD_PRELOAD="$CORRUPT_LIB" -x ITERTIME_TEST_CORRUPT_RANK=0 -- calibrate comm -o bad0.h5 "${NO_LOAD_RETRY[@]}" \
    --collectives all_reduce --dtypes fp32 --min-bytes 8 --max-bytes 8 --iters 1 --warmup 0
  expect_status 1
  expect_stderr "(rank 0 element 1: got 6.000000, want 1.000000)"

  # Control: the interposer targeting a rank that does not exist changes nothing.
  mpi 2 -x LD_PRELOAD="$CORRUPT_LIB" -x ITERTIME_TEST_CORRUPT_RANK=7 -- calibrate comm -o good.h5 "${NO_LOAD_RETRY[@]}" \
    --collectives all_reduce --dtypes fp32 --min-bytes 8 --max-bytes 8 --iters 1 --warmup 0
  expect_status 0
  expect_stdout "0 failed their check"
}

case_comm_existing() {
  mpi 2 -- calibrate comm -o comm.h5 "${NO_LOAD_RETRY[@]}" --collectives all_reduce --dtypes fp32 --max-bytes 64 --step-factor 8 --iters 1 --warmup 0
  expect_status 0
  [[ "$(rows comm.h5 | wc -l)" -eq 2 ]] || fail "the first run did not write 2 rows"
  local sum
  sum="$(md5sum <"$WORK/comm.h5")"

  mpi 2 -- calibrate comm -o comm.h5 "${NO_LOAD_RETRY[@]}" --collectives all_reduce --dtypes fp32 --max-bytes 512 --step-factor 8 --iters 1 --warmup 0
  expect_status 2
  [[ "$(lines_of "$ERR")" -eq 1 ]] || fail "$(lines_of "$ERR") lines on stderr, expected 1"
  expect_stderr "itertime: error: comm.h5: file exists; pass --force to overwrite it (or --resume to continue it)"
  [[ ! -s "$OUT" ]] || fail "stdout is not empty on a refusal"
  [[ "$(md5sum <"$WORK/comm.h5")" == "$sum" ]] || fail "the refused run changed comm.h5"

  mpi 2 -- calibrate comm -o comm.h5 "${NO_LOAD_RETRY[@]}" --force --resume --max-bytes 64
  expect_status 2
  [[ "$(lines_of "$ERR")" -eq 1 ]] || fail "--force --resume: $(lines_of "$ERR") lines on stderr, expected 1"
  expect_stderr "--force and --resume exclude each other"
  [[ "$(md5sum <"$WORK/comm.h5")" == "$sum" ]] || fail "--force --resume changed comm.h5"

  mpi 2 -- calibrate comm -o comm.h5 "${NO_LOAD_RETRY[@]}" --collectives all_reduce --dtypes fp32 --max-bytes 512 --step-factor 8 --iters 1 --warmup 0 --force
  expect_status 0
  read_rows_of comm.h5 3
  local dump="$ROWS"
  [[ "$(cut -f1 <<<"$dump" | tr '\n' ' ')" == "all_reduce/fp32/g2/consecutive/latency/8 all_reduce/fp32/g2/consecutive/latency/64 all_reduce/fp32/g2/consecutive/latency/512 " ]] ||
    fail "--force rows: $(cut -f1 <<<"$dump" | tr '\n' ' ')"
  [[ "$("$READ_ROWS" comm-samples "$WORK/comm.h5")" -eq 3 ]] || fail "--force kept old samples"
}

case_comm_outside_load() {
  # A process spinning beside the sweep is outside load: the stretch (here the whole sweep of 3 points,
  # its probe window held open to 400 ms) is measured again after waiting for a quiet moment (none comes
  # while it spins, so the wait ends after 10 s), then kept as it is and counted. One row per point.
  bash -c 'while :; do :; done' &
  local spinner=$!
  mpi 2 -- calibrate comm -o comm.h5 --collectives all_reduce --dtypes fp32 --max-bytes 512 --step-factor 8 \
    --iters 2 --warmup 0 --max-extra-tries 1
  local status=$STATUS
  cp "$OUT" "$WORK/.sweep-out"
  # A check that fails in the first, loaded attempt stands after the clean attempt that replaces it (the
  # interposer damages only the first all-reduce).
  mpi 2 -x LD_PRELOAD="$CORRUPT_LIB" -x ITERTIME_TEST_CORRUPT_RANK=1 -- calibrate comm -o bad.h5 \
    --collectives all_reduce --dtypes fp32 --min-bytes 8 --max-bytes 8 --iters 1 --warmup 0 --max-extra-tries 1
  kill "$spinner"
  wait "$spinner" 2>/dev/null
  expect_status 1
  expect_stdout "while measuring points 1-1: measuring them again"
  expect_stderr "itertime: CORRECTNESS CHECK FAILED for all_reduce/fp32/g2/consecutive/latency/8"
  [[ "$(rows bad.h5 | cut -f2)" == "1" ]] || fail "the loaded-then-clean point lost its check_errors"
  cp "$WORK/.sweep-out" "$OUT"
  STATUS=$status
  expect_status 0
  expect_stdout "while measuring points 1-3: measuring them again"
  expect_stdout "while measuring points 1-3: kept as they are"
  expect_stdout "# outside load: 3 point(s) measured again, 3 kept while still loaded (above 0.30 cores)"
  [[ "$(grep -c '^  [0-9]/3 ' "$OUT")" -eq 3 ]] || fail "stdout does not show each of the 3 points once"
  [[ "$(rows comm.h5 | wc -l)" -eq 3 ]] || fail "comm.h5 does not hold one row per point"

  mpi 2 -- calibrate comm -o other.h5 --max-bytes 64 --outside-load-cores -1
  expect_status 2
  expect_stderr "itertime: error: --outside-load-cores must not be negative"
  [[ ! -e "$WORK/other.h5" ]] || fail "a refused policy created other.h5"
  mpi 2 -- calibrate comm -o other.h5 --max-bytes 64 --max-extra-tries -2
  expect_status 2
  expect_stderr "itertime: error: --max-extra-tries must not be negative"
}

case_groundtruth() {
  # The job's fp16 configuration runs where this LibTorch multiplies fp16 on CPU (2.x), else it is skipped.
  local fp16_status=skipped measured=4 skipped=2
  if "$ITERTIME" info | grep -q '^ *CPU fp16 matmul *yes'; then fp16_status=ok measured=5 skipped=1; fi
  mpi 2 -- calibrate groundtruth --job "$SOURCE_DIR/jobs/reduced-cpu.json" -o gt.h5
  expect_status 0
  [[ ! -s "$ERR" ]] || fail "stderr is not empty on success"
  expect_stdout "# $measured measured, $skipped skipped, 0 failed, 0 already present"
  local dump
  dump="$("$READ_ROWS" groundtruth "$WORK/gt.h5")" || fail "read_rows groundtruth failed (bad offsets?)"
  [[ "$(wc -l <<<"$dump")" -eq 6 ]] || fail "gt.h5 has $(wc -l <<<"$dump") rows, expected 6"
  local m="tiny-llama-gqa" tail="mbs1/gbs4/seq32"
  [[ "$(cut -f1,2 <<<"$dump")" == "$m/dp1-tp1-pp1/$tail/fp32	ok
$m/dp2-tp1-pp1/$tail/fp32	ok
$m/dp1-tp2-pp1/$tail/amp-bf16	ok
$m/dp1-tp1-pp2/$tail/fp32	ok
$m/dp1-tp3-pp1/$tail/fp32	skipped
$m/dp1-tp1-pp1/$tail/fp16	$fp16_status" ]] || fail "keys and statuses: $(cut -f1,2 <<<"$dump")"
  # ok rows: empty reason; measured in at least the job's 2 rounds, one round row per round, each round
  # 3 samples or more (timed_iters); the row's time from its counted rounds' samples (timed_iters); one
  # rank row per rank; finite positive times, the median within the samples; the counted rounds' spread
  # within the job's 10% (NaN only below 2 counted rounds).
  awk -F'\t' '$2 == "ok" {
      ranks = $4 * $5 * $6
      if ($3 != "") { print "ok row with a reason: " $1; bad++ }
      if ($16 < 2 || $16 > 3 || $18 != $16 || $19 != $16) { print $1 ": rounds_run " $16 ", rounds_count " $18 ", round rows " $19; bad++ }
      if ($20 != $8 || $8 < 3 * $16) { print $1 ": samples_count " $8 ", round rows samples " $20; bad++ }
      if ($17 > $16 || ($17 > 0 && $7 != $22)) { print $1 ": rounds_counted " $17 ", timed_iters " $7 ", counted samples " $22; bad++ }
      if ($17 >= 2 && ($21 ~ /nan/ || !($21 >= 0 && $21 <= 10))) { print $1 ": round_spread_pct " $21; bad++ }
      if ($9 != ranks || $14 != ranks) { print $1 ": ranks_count " $9 ", rank rows " $14 ", want " ranks; bad++ }
      if (!($10 > 0 && $11 > 0 && $10 < 1e12 && $12 > 0 && $12 <= $11 && $13 >= $10)) { print $1 ": times " $10 " " $11 " " $12 " " $13; bad++ }
      if ($10 ~ /nan|inf/) { print $1 ": not finite"; bad++ }
    }
    $2 == "skipped" {
      if ($8 != 0 || $9 != 0 || $14 != 0 || $16 != 0 || $18 != 0) { print $1 ": a skipped row with samples, rank or round rows"; bad++ }
    }
    END { exit bad > 0 }' <<<"$dump" >"$WORK/.check" || fail "groundtruth rows: $(cat "$WORK/.check")"
  grep -P '^[^\t]*/dp1-tp3-pp1/[^\t]*\tskipped\t[^\t]*needs 3 ranks, the job runs on 2' <<<"$dump" >/dev/null ||
    fail "the tp=3 row does not say it needs 3 ranks"
  if [[ $fp16_status == skipped ]]; then
    grep -P '^[^\t]*/fp16\tskipped\t[^\t]*fp16[^\t]*cpu' <<<"$dump" >/dev/null || fail "the fp16 row does not say fp16 cannot run on cpu"
  fi

  mpi 2 -- calibrate groundtruth --job "$SOURCE_DIR/jobs/reduced-cpu.json" -o gt.h5 --resume
  expect_status 0
  expect_stdout "# 6 configurations already in gt.h5 (resuming)"
  expect_stdout "# 0 measured, 0 skipped, 0 failed, 6 already present"
  ! grep -q '^ *[0-9]*/6 ' "$OUT" || fail "the resumed run printed configuration lines"
  [[ "$("$READ_ROWS" groundtruth "$WORK/gt.h5")" == "$dump" ]] || fail "--resume changed the rows"
}

ALL_CASES=(comm_sweep comm_four_ranks comm_resume comm_corrupt comm_existing comm_outside_load groundtruth groundtruth_oom
           groundtruth_oom_ranks groundtruth_techniques)

# oom_job NAME MODEL MEASURED OOMS STATUSES CONFIGS: `calibrate groundtruth` on 2 ranks of a job NAME of
# MODEL and CONFIGS (JSON objects, comma-separated) into gt.h5; it must succeed with MEASURED
# configurations measured, OOMS out of memory and the rows' statuses STATUSES (space-separated, in
# order). The rows as read_rows prints them are left in OOM_ROWS.
oom_job() {
  local name="$1" model="$2" measured="$3" ooms="$4" statuses="$5" configs="$6"
  cat >"$WORK/job.json" <<JOB
{"name": "$name", "model": "$model", "backend": "cpu", "ranks": 2,
 "groundtruth": {"warmup_iters": 1, "timed_iters": 2, "rounds": 2, "max_extra_rounds": 0},
 "configs": [$configs]}
JOB
  mpi 2 -- calibrate groundtruth --job "$WORK/job.json" -o gt.h5
  expect_status 0
  expect_stdout "# $measured measured, 0 skipped, 0 failed, 0 already present"
  expect_stdout "# $ooms ran out of memory (status oom)"
  OOM_ROWS="$("$READ_ROWS" groundtruth "$WORK/gt.h5")" || fail "read_rows groundtruth failed"
  [[ "$(cut -f2 <<<"$OOM_ROWS" | tr '\n' ' ')" == "$statuses" ]] || fail "statuses: $(cut -f1,2 <<<"$OOM_ROWS")"
}

case_groundtruth_oom() {
  # A one-rank configuration whose tokens alone need 1 TiB (256M sequences of 512): the allocation is
  # refused at once, the configuration is recorded with status oom and its reason, and the job goes on
  # to the next; --resume measures nothing again.
  local dump
  oom_job oom "$SOURCE_DIR/data/models/tiny-llama-gqa.json" 2 1 "ok oom ok " '
  {"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 2, "seq_len": 16, "precision": "fp32"},
  {"dp": 1, "tp": 1, "pp": 1, "micro_batch": 268435456, "global_batch": 268435456, "seq_len": 512, "precision": "fp32"},
  {"dp": 2, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 2, "seq_len": 16, "precision": "fp32"}'
  dump="$OOM_ROWS"
  grep -P '^[^\t]*/mbs268435456/[^\t]*\toom\tout of memory on rank 0 of 1: [^\t]*allocate memory' <<<"$dump" >/dev/null ||
    fail "the oom row does not say it ran out of memory: $(grep mbs268435456 <<<"$dump")"
  awk -F'\t' '$2 == "oom" && ($8 != 0 || $9 != 0 || $14 != 0 || $16 != 0) { bad++ } END { exit bad > 0 }' <<<"$dump" ||
    fail "the oom row has samples, rank or round rows"
  mpi 2 -- calibrate groundtruth --job "$WORK/job.json" -o gt.h5 --resume
  expect_status 0
  expect_stdout "# 0 measured, 0 skipped, 0 failed, 3 already present"
  [[ "$("$READ_ROWS" groundtruth "$WORK/gt.h5")" == "$dump" ]] || fail "--resume changed the rows"
}

case_groundtruth_oom_ranks() {
  # Out of memory on several ranks. A vocabulary of 1M at hidden size 16 makes the last stage's logits
  # of 4K sequences of 16 need 256 GiB, while the first stage's activations need 4 MiB:
  #  - pp 2: only rank 1 (the last stage) runs out of memory, while rank 0 waits for its gradient in a
  #    point-to-point exchange; both leave the configuration, which is recorded oom with rank 1's words;
  #  - the next configuration (pp 2 again, small) trains on both ranks: nothing of the aborted one is left;
  #  - dp 2: both ranks run out at once.
  cat >"$WORK/model.json" <<MODEL
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "_name_or_path": "itertime/oom-vocab",
 "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
 "num_key_value_heads": 2, "vocab_size": 1048576, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
 "max_position_embeddings": 64, "tie_word_embeddings": false, "hidden_act": "silu", "torch_dtype": "float32"}
MODEL
  local dump
  oom_job oom-ranks "$WORK/model.json" 1 2 "oom ok oom " '
  {"dp": 1, "tp": 1, "pp": 2, "micro_batch": 4096, "global_batch": 8192, "seq_len": 16, "precision": "fp32"},
  {"dp": 1, "tp": 1, "pp": 2, "micro_batch": 1, "global_batch": 2, "seq_len": 16, "precision": "fp32"},
  {"dp": 2, "tp": 1, "pp": 1, "micro_batch": 4096, "global_batch": 8192, "seq_len": 16, "precision": "fp32"}'
  dump="$OOM_ROWS"
  grep -P '\toom\tout of memory on rank 1 of 2: [^\t]*allocate memory' <<<"$(head -1 <<<"$dump")" >/dev/null ||
    fail "the pipeline's oom row does not name rank 1 of 2: $(head -1 <<<"$dump")"
  grep -P '\toom\tout of memory on rank [01] of 2: ' <<<"$(sed -n 3p <<<"$dump")" >/dev/null ||
    fail "the dp 2 oom row does not say it ran out of memory: $(sed -n 3p <<<"$dump")"
}

case_groundtruth_techniques() {
  # Training techniques from a job (issue 16): the top level's default (selective recompute), turned off
  # by one configuration and added to by another, and the sweep's two recipes crossed with the three
  # layouts of 2 ranks, overlap with the distributed optimizer among them. A combination the trainer
  # cannot run is kept and recorded skipped with its reason: SP with a sequence TP does not divide.
  cat >"$WORK/job.json" <<JOB
{"name": "techniques", "model": "$SOURCE_DIR/data/models/tiny-llama-gqa.json", "backend": "cpu", "ranks": 2,
 "groundtruth": {"warmup_iters": 1, "timed_iters": 2, "rounds": 1, "max_extra_rounds": 0},
 "techniques": {"recompute": "selective"},
 "configs": [
  {"dp": 2, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 2, "seq_len": 16, "techniques": {"recompute": "none"}},
  {"dp": 1, "tp": 2, "pp": 1, "micro_batch": 1, "global_batch": 2, "seq_len": 16,
   "techniques": {"sequence_parallel": true, "vocab_parallel": true}},
  {"dp": 1, "tp": 2, "pp": 1, "micro_batch": 1, "global_batch": 2, "seq_len": 15, "techniques": {"sequence_parallel": true}}],
 "sweep": {"world_sizes": [2], "precisions": ["fp32"], "micro_batch": 1, "global_batch": 2, "seq_len": 16,
  "recipes": [{"distributed_optimizer": true, "recompute": "full"},
              {"distributed_optimizer": true, "overlap_gradient_reduction": true, "gradient_bucket_bytes": "4K"}]}}
JOB
  mpi 2 -- calibrate groundtruth --job "$WORK/job.json" -o gt.h5
  expect_status 0
  [[ ! -s "$ERR" ]] || fail "stderr is not empty on success"
  expect_stdout "# 8 measured, 1 skipped, 0 failed, 0 already present"
  local m="tiny-llama-gqa" tail="mbs1/gbs2/seq16/fp32" dump
  dump="$("$READ_ROWS" groundtruth-recipes "$WORK/gt.h5")" || fail "read_rows groundtruth-recipes failed"
  [[ "$(cut -f1-4 <<<"$dump")" == "$m/dp2-tp1-pp1/$tail	ok		plain
$m/dp1-tp2-pp1/$tail/sp+vp+rc-sel	ok	sp+vp+rc-sel	sp+vp+rc-sel
$m/dp1-tp2-pp1/mbs1/gbs2/seq15/fp32/sp+rc-sel	skipped	sp+rc-sel	sp+rc-sel
$m/dp2-tp1-pp1/$tail/dopt+rc-full	ok	dopt+rc-full	dopt+rc-full
$m/dp2-tp1-pp1/$tail/dopt+rc-sel+ovl-4K	ok	dopt+rc-sel+ovl-4K	dopt+rc-sel+ovl-4K
$m/dp1-tp2-pp1/$tail/dopt+rc-full	ok	dopt+rc-full	dopt+rc-full
$m/dp1-tp2-pp1/$tail/dopt+rc-sel+ovl-4K	ok	dopt+rc-sel+ovl-4K	dopt+rc-sel+ovl-4K
$m/dp1-tp1-pp2/$tail/dopt+rc-full	ok	dopt+rc-full	dopt+rc-full
$m/dp1-tp1-pp2/$tail/dopt+rc-sel+ovl-4K	ok	dopt+rc-sel+ovl-4K	dopt+rc-sel+ovl-4K" ]] ||
    fail "keys, statuses and recipes: $(cut -f1-4 <<<"$dump")"
  grep -P '/seq15/fp32/sp\+rc-sel\tskipped\t[^\t]*\t[^\t]*\t[^\t]*seq_len 15 is not a multiple of tp 2' <<<"$dump" >/dev/null ||
    fail "the SP row with seq 15 does not give the trainer's reason: $(grep seq15 <<<"$dump")"
  # The progress and summary lines show each configuration's recipe (the end of its key).
  grep -qE "^ +0 +[0-9]+/9 +$m/dp1-tp2-pp1/$tail/sp\+vp\+rc-sel " "$OUT" || fail "no round-0 line for the sp+vp configuration"
  grep -qE "^ +3/9 +$m/dp1-tp2-pp1/mbs1/gbs2/seq15/fp32/sp\+rc-sel +skipped " "$OUT" || fail "no summary line for a skipped recipe"
  (cd "$WORK" && "$ITERTIME" inspect gt.h5 >"$WORK/.inspect" 2>&1) || fail "itertime inspect failed"
  grep -qF "schema version 6" "$WORK/.inspect" || fail "inspect does not show schema version 6"
  grep -qE '^  plain +1 rows +\(1 ok\)$' "$WORK/.inspect" || fail "inspect lacks the plain recipe line: $(cat "$WORK/.inspect")"
  grep -qE '^  dopt\+rc-full +3 rows +\(3 ok\)$' "$WORK/.inspect" || fail "inspect lacks the dopt+rc-full line"
  grep -qE '^  dopt\+rc-sel\+ovl-4K +3 rows +\(3 ok\)$' "$WORK/.inspect" || fail "inspect lacks the dopt+ovl recipe line"
  grep -qE '^  sp\+rc-sel +1 rows +\(1 skipped\)$' "$WORK/.inspect" || fail "inspect lacks the skipped recipe line: $(cat "$WORK/.inspect")"

  # --resume finds every configuration by its key, recipe included.
  mpi 2 -- calibrate groundtruth --job "$WORK/job.json" -o gt.h5 --resume
  expect_status 0
  expect_stdout "# 0 measured, 0 skipped, 0 failed, 9 already present"
  [[ "$("$READ_ROWS" groundtruth-recipes "$WORK/gt.h5")" == "$dump" ]] || fail "--resume changed the rows"

  # A key the store's column would cut (resume could not find it again) is refused before any file.
  cp "$SOURCE_DIR/data/models/tiny-llama-gqa.json" "$WORK/a-model-name-that-is-rather-long-for-the-column.json"
  cat >"$WORK/long.json" <<JOB
{"model": "a-model-name-that-is-rather-long-for-the-column.json", "ranks": 2,
 "configs": [{"dp": 2, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 2, "seq_len": 16,
   "techniques": {"sequence_parallel": true, "vocab_parallel": true, "distributed_optimizer": true, "recompute": "full"}}]}
JOB
  mpi 2 -- calibrate groundtruth --job "$WORK/long.json" -o long.h5
  expect_status 2
  expect_stderr "/fp32/sp+vp+dopt+rc-full has 99 characters; /groundtruth/configs keeps 95"
  [[ ! -e "$WORK/long.h5" ]] || fail "a refused key created long.h5"
}

run_cases
