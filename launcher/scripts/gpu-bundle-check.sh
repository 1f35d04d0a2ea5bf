#!/usr/bin/env bash
# gpu-bundle-check.sh: proves that the GPU bundle is self-sufficient. Makes the bundle
# (gpu-bundle.sh, here, on Debian 12), then, in a bare Debian 12 root ($ITERTIME_DEB12_BARE_ROOT,
# default /var/tmp/itertime-deb12-bare, made and mounted by debian13.sh with ITERTIME_DEB_SUITE=bookworm)
# that has only a compiler, cmake, ninja, python3 and Debian's CPU LibTorch (libtorch-dev) and none of
# the packages the bundle carries, runs `gpu-run.sh --cpu`: prefix, build, info, comm, the CPU job,
# validation and the memory report; then `predict-only-check.sh`: the prediction-only build (the bundle
# without Open MPI; CMake's default MPI=AUTO finds none) and its whole ctest. As root. Prints the time of
# each step; exit status: the first failing step's.
#
#   launcher/scripts/gpu-bundle-check.sh [GPU_RUN_ARGS...]
#   launcher/scripts/gpu-bundle-check.sh --prepare   only make the bare root and install its tools (what
#                                                    the check does first; .ci/run does it in the background
#                                                    while the native leg runs), then exit
#
# Output: out/gpu-bundle (the bundle), out/gpu-run-cpu (gpu-run.sh's folder, its build included),
# out/predict-only (predict-only-check.sh's prefix and build).
set -euo pipefail
CHECKOUT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export ITERTIME_DEB13_ROOT="${ITERTIME_DEB12_BARE_ROOT:-/var/tmp/itertime-deb12-bare}"
export ITERTIME_DEB_SUITE=bookworm
elapsed() { local s=$(( $(date +%s) - $1 )); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

# The tools the GPU machine is said to have, installed in the bare root (idempotent: quick when present).
TOOLS='apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends g++ cmake ninja-build python3 libtorch-dev libopenblas0 >/dev/null'
if [ "${1:-}" = "--prepare" ]; then
  t0=$(date +%s)
  "$CHECKOUT/launcher/scripts/debian13.sh" -- bash -c "set -euo pipefail; $TOOLS"
  echo "gpu-bundle-check: time preparing the bare root: $(elapsed "$t0")"
  exit 0
fi
t0=$(date +%s)
echo "gpu-bundle-check: bundle: launcher/scripts/gpu-bundle.sh"
"$CHECKOUT/launcher/scripts/gpu-bundle.sh" "$CHECKOUT/out/gpu-bundle"
echo "gpu-bundle-check: time bundle: $(elapsed "$t0")"

# Inside the root, in the checkout (/itertime): the tools the GPU machine is said to have, checked to
# bring none of the bundle's packages, then the CPU-mode run, then the prediction-only build and its
# tests against the bundle without Open MPI (predict-only-check.sh; its build is kept in
# out/predict-only).
# shellcheck disable=SC2016  # expanded by the inner bash
INSIDE='
set -euo pipefail
elapsed() { local s=$(( $(date +%s) - $1 )); printf "%dm%02ds" $((s / 60)) $((s % 60)); }
t0=$(date +%s)
'"$TOOLS"'
echo "gpu-bundle-check: time tools and LibTorch: $(elapsed "$t0")"
bundled="$(awk "!/^#/ { print \$1 }" out/gpu-bundle/MANIFEST)"
present=""
for p in $bundled; do
  case "$p" in
    *-dev|openmpi-bin|openmpi-common|hdf5-helpers) dpkg -s "$p" >/dev/null 2>&1 && present="$present $p" ;;
  esac
done
if [ -n "$present" ]; then
  echo "gpu-bundle-check: error: the bare root has packages the bundle should bring:$present" >&2
  exit 1
fi
for tool in mpicc mpirun h5cc; do
  if command -v "$tool" >/dev/null; then echo "gpu-bundle-check: error: the bare root has $tool" >&2; exit 1; fi
done
echo "gpu-bundle-check: the root has none of the bundle'"'"'s build packages, no mpirun, mpicc or h5cc"
t0=$(date +%s)
launcher/scripts/gpu-run.sh --cpu --out out/gpu-run-cpu "$@"
echo "gpu-bundle-check: time gpu-run.sh --cpu: $(elapsed "$t0")"
t0=$(date +%s)
launcher/scripts/predict-only-check.sh --bundle out/gpu-bundle --out out/predict-only
echo "gpu-bundle-check: time predict-only-check.sh: $(elapsed "$t0")"
'
t0=$(date +%s)
"$CHECKOUT/launcher/scripts/debian13.sh" -- bash -c "$INSIDE" gpu-bundle-check "$@"
echo "gpu-bundle-check: time in the bare root: $(elapsed "$t0")"
