#!/usr/bin/env bash
# submit_cli.sh: `itertime slurm submit` end to end without Slurm: a fake sbatch records its argv and
# prints a job id (CTest `slurm_submit_cli`, label cli).
#
#   submit_cli.sh ITERTIME SOURCE_DIR
#
# Checks: user mistakes exit 2 with exactly one line on stderr and nothing on stdout or on disk;
# --dry-run prints the script and writes nothing; a submission writes OUTPUT.sbatch next to the output,
# runs sbatch without a shell (argv: --parsable SCRIPT) and prints the job id; sbatch refusing the job
# exits 2 with one line; a hostile output folder neither breaks the script nor injects.
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
take_args "ITERTIME SOURCE_DIR" "$@"
JOB="$SOURCE_DIR/jobs/reduced-cpu.json"
WORK="$(mktemp -d /tmp/itertime-submit-cli.XXXXXX)"
trap 'rm -rf -- "$WORK"' EXIT
cd "$WORK" || exit 1

failures=0
fail() {
  echo "FAIL [$CASE]: $*" >&2
  echo "--- stdout:" >&2
  cat "$WORK/.out" >&2
  echo "--- stderr:" >&2
  cat "$WORK/.err" >&2
  failures=$((failures + 1))
}

run() {  # run ARGS...: runs itertime, keeps stdout/stderr in .out/.err, the status in STATUS
  "$ITERTIME" "$@" >"$WORK/.out" 2>"$WORK/.err"
  STATUS=$?
}

listing() { find "$WORK" -mindepth 1 -not -name '.out' -not -name '.err' -not -path "$WORK/bin*" | sort; }

expect_user_error() {  # expect_user_error FRAGMENT ARGS...
  local fragment="$1"
  shift
  local before
  before="$(listing)"
  run "$@"
  [[ $STATUS -eq 2 ]] || fail "status $STATUS, expected 2"
  [[ "$(wc -l <"$WORK/.err")" -eq 1 ]] || fail "stderr is not exactly one line"
  grep -qF -- "$fragment" "$WORK/.err" || fail "stderr does not mention '$fragment'"
  grep -q '^itertime: error: ' "$WORK/.err" || fail "stderr does not start with 'itertime: error: '"
  [[ ! -s "$WORK/.out" ]] || fail "stdout is not empty"
  [[ "$(listing)" == "$before" ]] || fail "files changed: $(diff <(echo "$before") <(listing))"
}

mkdir -p "$WORK/bin" "$WORK/out"
cat >"$WORK/bin/sbatch" <<'EOF'
#!/bin/bash
# Fake sbatch: records argv, keeps a copy of the script, prints a job id as --parsable does.
printf '%s\n' "$@" >"$FAKE_SBATCH_ARGS"
cp -- "${@: -1}" "$FAKE_SBATCH_ARGS.script"
if [[ -n "${FAKE_SBATCH_FAIL:-}" ]]; then
  echo "sbatch: error: Batch job submission failed: Invalid partition name specified" >&2
  echo "sbatch: error: second line" >&2
  exit 1
fi
echo "sbatch: warning: a warning on stderr" >&2
echo "4242;itertimeci"
EOF
chmod +x "$WORK/bin/sbatch"
export FAKE_SBATCH_ARGS="$WORK/bin/args"

CASE=missing_job
expect_user_error "no such job file" slurm submit "$WORK/nope.json" -o "$WORK/out/r.h5" --dry-run
CASE=bad_time
expect_user_error "--time '2 hours' is not a Slurm time limit" slurm submit "$JOB" -o "$WORK/out/r.h5" --time "2 hours" --dry-run
CASE=zero_nodes
expect_user_error "--nodes must be at least 1" slurm submit "$JOB" -o "$WORK/out/r.h5" --nodes 0 --dry-run
CASE=cuda_without_gpus
expect_user_error "give --gpus-per-node" slurm submit "$SOURCE_DIR/jobs/llama3.1-8b-8gpu.json" -o "$WORK/out/r.h5" --dry-run
CASE=missing_output
expect_user_error "--output" slurm submit "$JOB"
CASE=missing_folder
expect_user_error "does not exist" slurm submit "$JOB" -o "$WORK/no/such/r.h5" --sbatch "$WORK/bin/sbatch"
CASE=no_sbatch
expect_user_error "cannot run it" slurm submit "$JOB" -o "$WORK/r.h5" --sbatch "$WORK/bin/no-sbatch" --script /dev/null
CASE=unknown_stage
expect_user_error "unknown stage 'fit'" slurm submit "$JOB" -o "$WORK/r.h5" --stages comm,fit --dry-run

# Issue 33: --dry-run checks what a submission checks, before it prints anything.
CASE=dry_run_missing_folder
expect_user_error "does not exist" slurm submit "$JOB" -o "$WORK/no/such/r.h5" --dry-run
CASE=dry_run_fewer_ranks
expect_user_error "the allocation holds 8 ranks (2 node(s) x 4)" \
  slurm submit "$SOURCE_DIR/jobs/slurm/llama3.1-8b-2x8gpu.json" -o "$WORK/out/r.h5" --nodes 2 --gpus-per-node 4 --dry-run
CASE=allow_fewer_ranks
before="$(listing)"
run slurm submit "$SOURCE_DIR/jobs/slurm/llama3.1-8b-2x8gpu.json" -o "$WORK/out/r.h5" --nodes 2 --gpus-per-node 4 \
  --allow-fewer-ranks --dry-run
[[ $STATUS -eq 0 ]] || fail "status $STATUS"
[[ "$(wc -l <"$WORK/.err")" -eq 1 ]] || fail "stderr is not exactly one line"
grep -q '^itertime: warning: the allocation holds 8 ranks' "$WORK/.err" || fail "no warning line"
grep -q '^RANKS=8$' "$WORK/.out" || fail "the script is not for 8 ranks"
[[ "$(listing)" == "$before" ]] || fail "--dry-run wrote files"

CASE=dry_run
before="$(listing)"
run slurm submit "$JOB" -o "$WORK/out/r.h5" --partition ci --time 30 --dry-run
[[ $STATUS -eq 0 ]] || fail "status $STATUS"
[[ "$(head -n 1 "$WORK/.out")" == "#!/bin/bash" ]] || fail "stdout is not a bash script"
grep -q '^#SBATCH --requeue$' "$WORK/.out" || fail "no --requeue"
grep -q '^#SBATCH --open-mode=append$' "$WORK/.out" || fail "no --open-mode=append"
grep -qF "#SBATCH --output=\"$WORK/out/r.h5.slurm-%j.log\"" "$WORK/.out" || fail "log path"
bash -n "$WORK/.out" || fail "the script does not parse"
[[ ! -s "$WORK/.err" ]] || fail "stderr is not empty"
[[ "$(listing)" == "$before" ]] || fail "--dry-run wrote files"

CASE=submit
SAVED_PATH="$PATH"
export PATH="$WORK/bin:$PATH"  # sbatch from PATH, the default
run slurm submit "$JOB" -o "$WORK/out/r.h5" --parsable
export PATH="$SAVED_PATH"
[[ $STATUS -eq 0 ]] || fail "status $STATUS"
[[ "$(cat "$WORK/.out")" == 4242 ]] || fail "--parsable printed '$(cat "$WORK/.out")', expected 4242"
[[ -f "$WORK/out/r.h5.sbatch" ]] || fail "no script next to the output"
[[ "$(cat "$FAKE_SBATCH_ARGS")" == "$(printf '%s\n' --parsable "$WORK/out/r.h5.sbatch")" ]] ||
  fail "sbatch argv: $(cat "$FAKE_SBATCH_ARGS")"
cmp -s "$WORK/out/r.h5.sbatch" "$FAKE_SBATCH_ARGS.script" || fail "sbatch did not get the written script"
[[ ! -e "$WORK/out/r.h5" ]] || fail "submitting created the HDF5 file"

CASE=submit_human
run slurm submit "$JOB" -o "$WORK/out/r.h5" --sbatch "$WORK/bin/sbatch"
[[ $STATUS -eq 0 ]] || fail "status $STATUS"
grep -q '^submitted batch job 4242$' "$WORK/.out" || fail "no 'submitted batch job 4242'"
grep -qF "log      $WORK/out/r.h5.slurm-4242.log" "$WORK/.out" || fail "the log path is not shown expanded"

CASE=sbatch_refuses
export FAKE_SBATCH_FAIL=1
expect_user_error "Invalid partition name specified; sbatch: error: second line" \
  slurm submit "$JOB" -o "$WORK/out/r.h5" --sbatch "$WORK/bin/sbatch" --script "$WORK/bin/kept.sbatch"
unset FAKE_SBATCH_FAIL

CASE=hostile_folder
HOSTILE="$WORK/o d 'q' \"d\" \$(touch INJECTED) ; \`touch INJECTED\` %j 100% & #x"
mkdir -p "$HOSTILE"
run slurm submit "$JOB" -o "$HOSTILE/r.h5" --sbatch "$WORK/bin/sbatch" --parsable --partition "p \$(touch INJECTED)"
[[ $STATUS -eq 0 ]] || fail "status $STATUS"
[[ -f "$HOSTILE/r.h5.sbatch" ]] || fail "no script in the hostile folder"
bash -n "$HOSTILE/r.h5.sbatch" || fail "the script does not parse"
grep -qF "OUTPUT='$WORK/o d '\\''q'\\'' \"d\" \$(touch INJECTED) ; \`touch INJECTED\` %j 100% & #x/r.h5'" \
  "$HOSTILE/r.h5.sbatch" || fail "OUTPUT is not single-quoted as expected"
grep -qF '%%j 100%% & #x/r.h5.slurm-%j.log"' "$HOSTILE/r.h5.sbatch" || fail "the log pattern's % are not escaped"
! find "$WORK" -name 'INJECTED*' | grep -q . || fail "something was injected"

if [[ $failures -gt 0 ]]; then
  echo "$failures case(s) failed" >&2
  exit 1
fi
echo "all slurm submit CLI cases passed"
