# lib.sh: what the end-to-end shell tests share, sourced by tests/e2e/*.sh and tests/slurm/*.sh: their
# arguments by name, mpiexec's --quiet probe, and for the scripts that run itertime into $OUT and $ERR
# with the status in $STATUS, the checks of a run, the report of a failed check and the loop over cases.
# Invariants: sourcing it sets `set -uo pipefail` and the run's variables (failures=0, WORK, OUT, ERR
# empty, STATUS=0) and defines the functions below, which a script may redefine after sourcing (its own
# fail, say); each function touches only the variables it names. A failed check counts in $failures and
# the script goes on; run_cases and finish_cases turn the count into the exit status (1 when any failed).
set -uo pipefail

# take_args "USAGE" "$@": the script's arguments by the names of its usage line, e.g.
#   take_args "MPIEXEC MPIEXEC_FLAGS ITERTIME SOURCE_DIR CASE..." "$@"
# sets MPIEXEC, MPIEXEC_FLAGS (an array, split at blanks), ITERTIME and SOURCE_DIR, and the array CASES.
# MPIEXEC and CASE are taken as given; every other name is a path, made absolute (realpath). A last name
# "NAME..." takes one or more arguments, "[NAME...]" none or more, into CASES; without one the count is
# exact. A wrong count prints "usage: SCRIPT USAGE" on stderr and exits 64.
take_args() {
  local usage="$1"
  shift
  local -a names
  read -r -a names <<<"$usage"
  local fixed=${#names[@]} rest=""
  if [[ "${names[-1]}" == *... || "${names[-1]}" == *...\] ]]; then
    rest="${names[-1]}"
    fixed=$((fixed - 1))
  fi
  local counted
  if [[ -z "$rest" ]]; then
    counted=$(($# == fixed))
  elif [[ "$rest" == \[* ]]; then
    counted=$(($# >= fixed))
  else
    counted=$(($# > fixed))
  fi
  if [[ $counted -ne 1 ]]; then
    echo "usage: $0 $usage" >&2
    exit 64
  fi
  local i
  for ((i = 1; i <= fixed; ++i)); do
    case "${names[i - 1]}" in
      MPIEXEC_FLAGS) read -r -a MPIEXEC_FLAGS <<<"${!i}" ;;
      MPIEXEC | CASE) printf -v "${names[i - 1]}" '%s' "${!i}" ;;
      *) printf -v "${names[i - 1]}" '%s' "$(realpath "${!i}")" ;;
    esac
  done
  CASES=("${@:fixed+1}")
}

# probe_quiet: QUIET=(--quiet) when $MPIEXEC has the option (Open MPI 4), else () (Open MPI 5's prterun
# refuses it), so that stderr holds only what itertime writes.
probe_quiet() {
  QUIET=(--quiet)
  if ! "$MPIEXEC" --quiet -n 1 true >/dev/null 2>&1; then QUIET=(); fi
}

failures=0
WORK=""
OUT=""
ERR=""
STATUS=0

# fail MESSAGE: reports a failed check of case $CASE with the run's last 40 lines of stdout and stderr.
fail() {
  echo "FAIL [$CASE]: $*" >&2
  if [[ -n "$OUT" && -f "$OUT" ]]; then echo "--- stdout (last 40 lines):" >&2; tail -n 40 "$OUT" >&2; fi
  if [[ -n "$ERR" && -f "$ERR" ]]; then echo "--- stderr (last 40 lines):" >&2; tail -n 40 "$ERR" >&2; fi
  failures=$((failures + 1))
}

lines_of() { awk 'END { print NR }' "$1"; }
expect_status() { [[ $STATUS -eq $1 ]] || fail "exit status $STATUS, expected $1"; }
expect_stdout() { grep -qF -- "$1" "$OUT" || fail "stdout lacks '$1'"; }
expect_stderr() { grep -qF -- "$1" "$ERR" || fail "stderr lacks '$1'"; }

# The folder, inside each case's working folder, that holds $OUT and $ERR (not part of what a case writes).
RUN_FILES=".e2e"

# run_cases: runs case_NAME for each NAME of CASES (every one of ALL_CASES when CASES is empty), each in
# a fresh temporary folder $WORK (removed afterwards, also on exit), printing "ok   NAME (S s)" or
# "FAIL NAME"; then finish_cases. An unknown name exits 64.
run_cases() {
  trap 'if [[ -n "$WORK" && -d "$WORK" ]]; then rm -rf "$WORK"; fi' EXIT
  [[ ${#CASES[@]} -gt 0 ]] || CASES=("${ALL_CASES[@]}")
  local before started
  for CASE in "${CASES[@]}"; do
    if ! declare -F "case_$CASE" >/dev/null; then
      echo "unknown case '$CASE'; known: ${ALL_CASES[*]}" >&2
      exit 64
    fi
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/itertime-e2e.XXXXXX")"
    mkdir "$WORK/$RUN_FILES"
    OUT="$WORK/$RUN_FILES/stdout"
    ERR="$WORK/$RUN_FILES/stderr"
    before=$failures
    started=$SECONDS
    "case_$CASE"
    rm -rf "$WORK"
    if [[ $failures -eq $before ]]; then echo "ok   $CASE ($((SECONDS - started)) s)"; else echo "FAIL $CASE"; fi
  done
  finish_cases
}

# finish_cases: exits 1, naming the count, when any check failed.
finish_cases() {
  if [[ $failures -ne 0 ]]; then
    echo "$failures check(s) failed" >&2
    exit 1
  fi
}
