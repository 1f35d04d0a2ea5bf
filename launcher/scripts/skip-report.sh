#!/usr/bin/env bash
# Prints what the last ctest run in a build folder skipped, so that a skip never reads as a pass:
#  - the CTest tests reported "Skipped" (a GoogleTest case discovered one by one, or a script that exited
#    with its SKIP_RETURN_CODE, e.g. slurm_cluster's 77), each with its name;
#  - inside each MPI-launched GoogleTest binary (one CTest test for a whole binary, e.g.
#    itertime_torch_tests_np1), how many of its cases skipped, out of how many, from rank 0's summary.
# The stack (LibTorch, Open MPI, HDF5 versions, from `itertime info`) heads the report: what skips is
# what this stack cannot run.
#
#   skip-report.sh BUILD_DIR
#
# Reads BUILD_DIR/Testing/Temporary/LastTest.log; prints nothing but a note when there is none. Exit 0.
set -uo pipefail
BUILD_DIR="${1:?usage: skip-report.sh BUILD_DIR}"
LOG="$BUILD_DIR/Testing/Temporary/LastTest.log"
[[ -r "$LOG" ]] || { echo "skip-report: no $LOG (ctest has not run in $BUILD_DIR)"; exit 0; }

stack=""
if [[ -x "$BUILD_DIR/launcher/itertime" ]]; then
  stack=$("$BUILD_DIR/launcher/itertime" info 2>/dev/null | grep -E '^  (LibTorch|HDF5|MPI) ' | sed -E 's/^ +//; s/  +/ /' | paste -sd ';' -)
fi
echo "skip-report: ${stack:-stack unknown}"
# One block per test in LastTest.log: "N/M Testing: NAME" ... "<end of output>" ... "Test Passed." or the like.
awk '
  /^[0-9]+\/[0-9]+ Testing: / { name = $3; passed = ""; skipped = 0; listed = ""; next }
  /^\[  PASSED  \] [0-9]+ test/ { if (passed == "") passed = $4 }
  /^\[  SKIPPED \] [0-9]+ test/ { if (listed == "") { skipped = $4; listed = "yes" } }
  /^Test Passed\./ || /^Test Failed\./ || /^Test Skipped\./ || /^Test Not Run/ || /^Test Disabled/ {
    if ($0 ~ /Skipped/) { whole++; printf "skip-report:   skipped whole: %s\n", name }
    else if (skipped > 0) { cases++; printf "skip-report:   %-34s %4d of %4d GoogleTest cases skipped\n", name, skipped, skipped + passed }
  }
  END { printf "skip-report: %d CTest tests skipped whole, %d binaries with skipped cases inside\n", whole + 0, cases + 0 }
' "$LOG"
exit 0
