#!/usr/bin/env bash
# The README's test command: installs the dependencies (apt-get), builds, and runs every test
# (unit, MPI at 2 and 4 ranks, end-to-end), then reports what was skipped. Exit status is ctest's.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
"$ROOT/launcher/scripts/setup-debian.sh"
# The Python module is required here (setup-debian.sh installs pybind11-dev and python3-dev), so its
# tests (label python) run rather than skip.
"$ROOT/launcher/scripts/build.sh" -DITERTIME_BUILD_TESTS=ON -DITERTIME_WITH_PYTHON=ON
BUILD_DIR="${ITERTIME_BUILD_DIR:-$ROOT/build}"
# Open MPI refuses to run as root unless told; CI and containers run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Tests run two at a time by default (ctest --parallel = the cores): the MPI tests declare their ranks
# (CTest PROCESSORS), so a 4-rank test runs alone and unit tests fill the gaps; a -j/--parallel given
# here wins. The skip report after it says what this stack skipped (launcher/scripts/skip-report.sh).
parallel=(--parallel "$(nproc)")
for arg in "$@"; do
  case "$arg" in -j*|--parallel*) parallel=() ;; esac
done
rc=0
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 1200 --output-junit "$BUILD_DIR/ctest-junit.xml" "${parallel[@]}" "$@" || rc=$?
"$ROOT/launcher/scripts/skip-report.sh" "$BUILD_DIR" "$BUILD_DIR/ctest-junit.xml"
exit "$rc"
