#!/usr/bin/env bash
# Prints what a ctest run skipped, so that a skip never reads as a pass:
#  - the CTest tests that did not run (a GoogleTest case discovered one by one that called GTEST_SKIP, or a
#    script that exited with its SKIP_RETURN_CODE, e.g. slurm_cluster's 77), each with CTest's reason and
#    the last line it printed;
#  - inside each MPI-launched GoogleTest binary (one CTest test for a whole binary, e.g.
#    itertime_torch_tests_np1), how many of its cases skipped, out of how many, from rank 0's summary.
# The stack (LibTorch, HDF5, MPI versions, from `itertime info`) heads the report: what skips is what this
# stack cannot run.
#
#   skip-report.sh BUILD_DIR [JUNIT_XML]
#
# Reads the JUnit file of the run (ctest --output-junit; default BUILD_DIR/ctest-junit.xml, where
# test.sh writes it). Prints a note and exits 0 when there is none; exit 0 always.
set -uo pipefail
BUILD_DIR="${1:?usage: skip-report.sh BUILD_DIR [JUNIT_XML]}"
XML="${2:-$BUILD_DIR/ctest-junit.xml}"
[[ -r "$XML" ]] || { echo "skip-report: no $XML (run ctest with --output-junit)"; exit 0; }

stack=""
if [[ -x "$BUILD_DIR/launcher/itertime" ]]; then
  stack=$("$BUILD_DIR/launcher/itertime" info 2>/dev/null | grep -E '^  (LibTorch|HDF5|MPI)  ' | sed -E 's/^ +//; s/  +/ /' | paste -sd ';' -)
fi
echo "skip-report: ${stack:-stack unknown}"
# One <testcase> block per test; colour escapes are written as [NON-XML-CHAR-0x1B][...m.
sed -E 's/\[NON-XML-CHAR-0x1B\]\[[0-9;]*m//g' "$XML" | awk '
  /<testcase / {
    name = $0; sub(/.*<testcase name="/, "", name); sub(/".*/, "", name)
    notrun = ($0 ~ /status="notrun"/); reason = ""; last = ""; passed = 0; skipped = 0; total++
    next
  }
  /<skipped message="/ { reason = $0; sub(/.*<skipped message="/, "", reason); sub(/".*/, "", reason); next }
  /<\/testcase>/ {
    if (notrun) { whole++; printf "skip-report:   did not run: %s (%s)%s\n", name, reason, last == "" ? "" : ": " last }
    else if (skipped > 0) { inside++; printf "skip-report:   %-34s %4d of %4d GoogleTest cases skipped\n", name, skipped, skipped + passed }
    next
  }
  {
    line = $0; sub(/^[ \t]*(<system-out>)?/, "", line); sub(/<\/system-out>$/, "", line)
    if (line ~ /^\[  PASSED  \] [0-9]+ test/ && !passed) { split(line, w, " "); passed = w[4] }
    if (line ~ /^\[  SKIPPED \] [0-9]+ test/ && !skipped) { split(line, w, " "); skipped = w[4] }
    if (line != "") last = substr(line, 1, 160)
  }
  END { printf "skip-report: %d of %d CTest tests did not run; %d binaries skipped cases inside\n", whole + 0, total + 0, inside + 0 }
'
exit 0
