#!/usr/bin/env bash
# predict-only-check.sh: proves that prediction builds and passes its tests without MPI and LibTorch
# (docs/build.md, "A prediction-only build"). Unpacks the GPU bundle's packages except Open MPI's into a
# prefix (deb_extract.py), so that only a compiler, cmake, ninja, python3, HDF5, Boost.Serialization and
# the header libraries (CLI11, nlohmann-json, GoogleTest) are there; checks that no MPI is in sight;
# configures with the default options (ITERTIME_WITH_MPI=AUTO must find none: a prediction-only build),
# builds everything, checks that `itertime` loads no MPI or LibTorch library and refuses `calibrate` in
# one line, and runs the whole ctest of that build (the fuzzers at ITERTIME_FUZZ_INPUTS inputs per
# target, default 2,000 here: the native leg runs them at full size).
# gpu-bundle-check.sh runs it in its bare Debian 12 root, after gpu-run.sh --cpu; --sanitize runs the
# prediction code under the sanitizers without MPI (docs/build.md, "Sanitizers"; not in CI: it lengthens
# the leg: its build took 11m41s and its tests 5m21s in the bare root, 2026-12-07).
#
#   launcher/scripts/predict-only-check.sh [--bundle DIR] [--out DIR] [--sanitize] [CTEST ARGS...]
#
#   --bundle DIR   the bundle (default: out/gpu-bundle)
#   --out DIR      the folder for the prefix and the build (default: out/predict-only; its build is kept,
#                  so a second run only rebuilds what changed)
#   --sanitize     build with AddressSanitizer and UndefinedBehaviorSanitizer (ITERTIME_SANITIZE=
#                  address,undefined, -O1 -g1, as launcher/scripts/sanitize.sh) and run the tests under
#                  them, leaks checked, halting at the first report
#
# Needs no root and no package access. Prints the time of each step; exit status: 2 for a wrong
# argument or a missing bundle, else the first failing step's (ctest's for the tests).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUNDLE="$ROOT/out/gpu-bundle"
OUT="$ROOT/out/predict-only"
SANITIZE=""
die() { echo "predict-only-check: error: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bundle) BUNDLE="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --sanitize) SANITIZE=address,undefined; shift ;;
    -h|--help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
[[ -d "$BUNDLE/debs" ]] || die "no bundle at $BUNDLE (make one with launcher/scripts/gpu-bundle.sh)"
for tool in python3 cmake ninja; do command -v "$tool" >/dev/null || die "$tool not found"; done
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
PREFIX="$OUT/prefix"
BUILD="$OUT/build"
elapsed() { local s=$(( $(date +%s) - $1 )); printf '%dm%02ds' $((s / 60)) $((s % 60)); }
log() { echo "predict-only-check: $*"; }
fail() { echo "predict-only-check: error: $*" >&2; exit 1; }

# 1. The prefix: the bundle without Open MPI (its runtime helpers, e.g. libpmix, are harmless alone).
t0=$(date +%s)
debs=()
for deb in "$BUNDLE"/debs/*.deb; do
  case "$(basename "$deb")" in
    openmpi-*|libopenmpi*) ;;
    *) debs+=("$deb") ;;
  esac
done
stamp="$PREFIX/.debs"
want="$(printf '%s\n' "${debs[@]##*/}")"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  rm -rf "$PREFIX"
  python3 "$ROOT/launcher/scripts/deb_extract.py" "$PREFIX" "${debs[@]}" >/dev/null
  for name in h5cc h5c++; do sed -i "s|^prefix=\"/usr\"|prefix=\"$PREFIX/usr\"|" "$PREFIX/usr/bin/$name"; done
  echo "$want" >"$stamp"
fi
log "time prefix (${#debs[@]} packages, no Open MPI): $(elapsed "$t0")"

# 2. No MPI anywhere CMake would look.
LIB="$PREFIX/usr/lib/x86_64-linux-gnu"
export PATH="$PREFIX/usr/bin:$PATH"
export LD_LIBRARY_PATH="$LIB:$LIB/hdf5/serial${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CPATH="$PREFIX/usr/include/x86_64-linux-gnu${CPATH:+:$CPATH}"  # multiarch headers (OpenSSL's opensslconf.h)
for tool in mpicc mpicxx mpirun mpiexec; do
  if command -v "$tool" >/dev/null; then fail "$tool is on PATH ($(command -v "$tool")): not a root without MPI"; fi
done
found="$(find /usr/include /usr/lib/x86_64-linux-gnu/openmpi "$PREFIX/usr/include" "$LIB/openmpi" \
  -name mpi.h 2>/dev/null | head -n 1 || true)"
[[ -z "$found" ]] || fail "an MPI header is installed ($found): not a root without MPI"
log "no mpicc, mpirun or mpi.h in sight"

# 3. Configure with the defaults (MPI AUTO), build everything. At -O1: this build proves that the front
# builds and passes its tests without MPI or LibTorch, not its speed, and -O1 compiles faster than
# Release's -O3 (it is a cold build inside CI's bare-root leg).
t0=$(date +%s)
build_type=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG")
if [[ -n "$SANITIZE" ]]; then
  # Line tables for the reports' stacks; these flags replace RelWithDebInfo's -O2 -g -DNDEBUG, so assertions
  # are on (as in sanitize.sh).
  build_type=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1"
              -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1")
fi
cmake -S "$ROOT" -B "$BUILD" -G Ninja "${build_type[@]}" -DITERTIME_SANITIZE="$SANITIZE" -DITERTIME_BUILD_TESTS=ON \
  -DITERTIME_BUILD_BENCHMARKS=OFF -DCMAKE_PREFIX_PATH="$PREFIX/usr" \
  -DHDF5_C_COMPILER_EXECUTABLE="$PREFIX/usr/bin/h5cc" -DHDF5_CXX_COMPILER_EXECUTABLE="$PREFIX/usr/bin/h5c++" \
  >"$OUT/configure.log" 2>&1 || { tail -n 25 "$OUT/configure.log" >&2; fail "configure failed ($OUT/configure.log)"; }
grep -q 'itertime .*: MPI=OFF CUDA=OFF NCCL=OFF LibTorch=OFF' "$OUT/configure.log" ||
  fail "the configure step did not make a prediction-only build: $(grep 'itertime .*: MPI=' "$OUT/configure.log")"
log "configure: $(grep -o 'MPI=OFF.*' "$OUT/configure.log")"
ninja -C "$BUILD" -j "$(nproc)" >"$OUT/build.log" 2>&1 || { tail -n 25 "$OUT/build.log" >&2; fail "build failed ($OUT/build.log)"; }
log "time configure and build: $(elapsed "$t0")"

# 4. The front alone, no calibration binary; it loads no MPI or LibTorch library and refuses calibrate.
[[ ! -e "$BUILD/launcher/itertime-calibrate" ]] || fail "a prediction-only build made itertime-calibrate"
if ldd "$BUILD/launcher/itertime" | grep -Ei 'libmpi|libtorch|libc10|libcuda|libnccl'; then
  fail "itertime loads an MPI, LibTorch or CUDA library"
fi
set +e
message="$("$BUILD/launcher/itertime" calibrate comm -o "$OUT/x.h5" 2>&1 >/dev/null)"
status=$?
set -e
[[ $status -eq 2 && "$message" == "itertime: error: calibrate: this itertime is a prediction-only build"* ]] ||
  fail "calibrate in a prediction-only build: exit $status, '$message'"
log "itertime: $(ldd "$BUILD/launcher/itertime" | wc -l) shared libraries, no MPI or LibTorch; calibrate refused (exit 2)"

# 5. Every test of the build.
t0=$(date +%s)
set +e
if [[ -n "$SANITIZE" ]]; then
  export ASAN_OPTIONS="halt_on_error=1:verify_asan_link_order=0:detect_leaks=1"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
  export LSAN_OPTIONS="suppressions=$ROOT/tests/sanitizers/lsan.supp:print_suppressions=0"
fi
ITERTIME_FUZZ_INPUTS="${ITERTIME_FUZZ_INPUTS:-2000}" ctest --test-dir "$BUILD" --output-on-failure --timeout 600 -j "$(nproc)" "$@"
rc=$?
set -e
log "time ctest: $(elapsed "$t0") (exit status $rc)"
exit "$rc"
