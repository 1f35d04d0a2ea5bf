#!/usr/bin/env bash
# The sanitizer leg (docs/build.md, "Sanitizers"): builds itertime without LibTorch, with
# AddressSanitizer + UndefinedBehaviorSanitizer (-DITERTIME_SANITIZE=address,undefined), into its own
# folder, and runs every test that build registers except the Slurm cluster test: unit (itertime_unit_tests,
# itertime_predict_tests, itertime_slurm_tests, layering), mpi (itertime_mpi_tests at 2 and 4 ranks),
# cli and e2e (the `itertime` binary end to end, calibrate comm through mpiexec, the watchdog) and fuzz
# (at reduced input counts). The LibTorch tests (label torch, the groundtruth e2e cases, the pipeline) are
# not built here. Any sanitizer report fails its test (halt_on_error, no recovery from UB); leaks are
# checked in the unit and fuzz tests (see below for the MPI-launched ones).
#
#   sanitize.sh [CTEST ARGS...]     e.g. sanitize.sh -L unit
#
# ITERTIME_SANITIZE_BUILD_DIR (default build-asan), ITERTIME_SANITIZE (default address,undefined),
# ITERTIME_FUZZ_INPUTS / _H5_INPUTS / _CLI_INPUTS (defaults below) override; ITERTIME_SANITIZE_NO_BUILD=1
# runs the tests of the folder as it is (no setup, configure or build). Prints the build and test
# wall times; exit status: the configure's, the build's, or ctest's.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${ITERTIME_SANITIZE_BUILD_DIR:-$ROOT/build-asan}"
SANITIZE="${ITERTIME_SANITIZE:-address,undefined}"

t0=$(date +%s)
if [[ "${ITERTIME_SANITIZE_NO_BUILD:-0}" != 1 ]]; then
  "$ROOT/launcher/scripts/setup-debian.sh"
  # -O1 -g1 (line tables for the reports' stacks): what the sanitizers' documentation advises, and
  # quicker to build than -O2 -g.
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DITERTIME_SANITIZE="$SANITIZE" -DITERTIME_WITH_TORCH=OFF \
    -DITERTIME_WITH_CUDA=OFF -DITERTIME_BUILD_BENCHMARKS=OFF -DITERTIME_BUILD_TESTS=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1"
  cmake --build "$BUILD_DIR" --parallel "$(nproc)"
fi
t1=$(date +%s)

# Open MPI refuses to run as root unless told; CI and containers run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# verify_asan_link_order=0: e2e_comm_corrupt LD_PRELOADs a PMPI interposer (not instrumented) ahead of
# the ASan runtime. Leaks are reported, except those allocated inside HDF5 or Open MPI (and PMIx, hwloc,
# libevent) and JobAbort's deliberate one: tests/sanitizers/lsan.supp says why. The MPI tests need full
# stacks for that (fast_unwind_on_malloc=0, which doubles the cost of a malloc). Leak checking is off for
# the tests that run `itertime` under mpiexec (labels e2e, cli; ASan and UBSan stay on): LeakSanitizer's
# tracer crashes at its exit ("Tracer caught signal 11", e2e_comm_*, e2e_watchdog_bad_value), which is
# open (docs/build.md, "Sanitizers"); ITERTIME_SANITIZE_MPI_LEAKS=1 turns it on there too.
ASAN_COMMON="halt_on_error=1:verify_asan_link_order=0"
ASAN_MPI="$ASAN_COMMON:detect_leaks=1:fast_unwind_on_malloc=0"
ASAN_E2E="$ASAN_COMMON:detect_leaks=0"
if [[ "${ITERTIME_SANITIZE_MPI_LEAKS:-0}" == 1 ]]; then ASAN_E2E="$ASAN_MPI"; fi
export LSAN_OPTIONS="suppressions=$ROOT/tests/sanitizers/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# The fuzzers fork a worker per input; under ASan each input costs several times more than in the
# plain build, so this leg runs fewer (docs/build.md, "Sanitizers"); the plain legs run the full counts.
export ITERTIME_FUZZ_INPUTS="${ITERTIME_FUZZ_INPUTS:-20000}"
export ITERTIME_FUZZ_H5_INPUTS="${ITERTIME_FUZZ_H5_INPUTS:-1000}"
export ITERTIME_FUZZ_CLI_INPUTS="${ITERTIME_FUZZ_CLI_INPUTS:-10}"

CTEST=(ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 900 --parallel "$(nproc)")
rc=0
ASAN_OPTIONS="$ASAN_COMMON:detect_leaks=1" "${CTEST[@]}" -L 'unit|fuzz' "$@" || rc=$?
ASAN_OPTIONS="$ASAN_MPI" "${CTEST[@]}" -L mpi -LE 'unit|fuzz|e2e|cli' "$@" || rc=$?
ASAN_OPTIONS="$ASAN_E2E" "${CTEST[@]}" -L 'e2e|cli' -LE 'unit|fuzz|slurm' "$@" || rc=$?
t2=$(date +%s)
echo "sanitize.sh: ${SANITIZE}: build $((t1 - t0)) s, tests $((t2 - t1)) s, total $((t2 - t0)) s, exit ${rc}"
exit "$rc"
