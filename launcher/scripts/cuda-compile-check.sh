#!/usr/bin/env bash
# Compile check of the CUDA/NCCL build, no GPU needed: in a Debian 13 (trixie) root of its own
# ($ITERTIME_DEB13_CUDA_ROOT, default /var/tmp/itertime-deb13-cuda; made and mounted by debian13.sh,
# separate from debian13.sh's root because libtorch-cuda-dev conflicts with libtorch-dev), installs the
# build dependencies with the CUDA LibTorch, NCCL and nvcc (setup-debian.sh --cuda: libtorch-cuda-dev,
# libnccl-dev, nvidia-cuda-toolkit from contrib/non-free), then configures with -DITERTIME_WITH_CUDA=ON
# and builds every target, tests and benchmarks included, into build-deb13-cuda/ of the checkout.
# Nothing is run (the CUDA tests need a GPU). As root. Prints the time of each step; exit status is the
# install's or the build's.
#
#   launcher/scripts/cuda-compile-check.sh [CMAKE_CONFIGURE_ARGS...]
#
# cuDNN: libtorch-cuda-dev depends on nvidia-cudnn, an install script that downloads cuDNN from
# developer.download.nvidia.com once NVIDIA's licence is agreed to. By default this check declines the
# licence (debconf nvidia-cudnn/question = "I Decline"): nothing is downloaded from NVIDIA, only
# Debian's mirror is needed, and the links ignore the then missing libcudnn.so.9 that libtorch_cuda.so
# needs (-Wl,--allow-shlib-undefined, for this build folder only; the binaries are never run here).
# The links also search the C++ compiler's own libstdc++ folder first (-L/usr/lib/gcc/x86_64-linux-gnu/14):
# without it they fail on Debian 13 (nvcc's host compiler is g++-13, CMake's CUDA implicit link folder
# /usr/lib/gcc/x86_64-linux-gnu/13 then shadows the system libstdc++: undefined __cxa_call_terminate).
# ITERTIME_CUDNN_DOWNLOAD=1 agrees to the licence instead and downloads cuDNN 9.0 (needs NVIDIA reachable).
set -euo pipefail
CHECKOUT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export ITERTIME_DEB13_ROOT="${ITERTIME_DEB13_CUDA_ROOT:-/var/tmp/itertime-deb13-cuda}"

# Runs inside the root, in the checkout (/itertime); $1 = ITERTIME_CUDNN_DOWNLOAD, then CMake arguments.
# shellcheck disable=SC2016  # expanded by the inner bash
INSIDE='
set -euo pipefail
elapsed() { local s=$(( $(date +%s) - $1 )); printf "%dm%02ds" $((s / 60)) $((s % 60)); }
cudnn_download="$1"; shift
if [ "$cudnn_download" = 1 ]; then
  echo "nvidia-cudnn nvidia-cudnn/question select I Agree" | debconf-set-selections
  ldflags=""
else
  echo "nvidia-cudnn nvidia-cudnn/question select I Decline" | debconf-set-selections
  ldflags="-Wl,--allow-shlib-undefined"
fi
t0=$(date +%s)
echo "cuda-compile-check: install: launcher/scripts/setup-debian.sh --cuda"
launcher/scripts/setup-debian.sh --cuda
echo "cuda-compile-check: time install: $(elapsed "$t0")"
# Link workaround: nvcc 12.4 uses g++-13 as host compiler, the C++ compiler is g++-14, and CMake puts the
# CUDA implicit link folder /usr/lib/gcc/x86_64-linux-gnu/13 (holding g++-13'"'"'s older libstdc++.so) on
# the links; objects from g++-14 (ours, libgtest.a) then miss __cxa_call_terminate. Searching the C++
# compiler'"'"'s own folder first links the system libstdc++ again.
cxx_libdir="$(dirname "$(c++ -print-file-name=libstdc++.so)")"
ldflags="$ldflags -L$cxx_libdir"
echo "cuda-compile-check: linker flags: $ldflags"
linker=("-DCMAKE_EXE_LINKER_FLAGS=$ldflags" "-DCMAKE_SHARED_LINKER_FLAGS=$ldflags")
t0=$(date +%s)
echo "cuda-compile-check: build: ITERTIME_BUILD_DIR=/itertime/build-deb13-cuda launcher/scripts/build.sh -DITERTIME_WITH_CUDA=ON ..."
set +e
ITERTIME_BUILD_DIR=/itertime/build-deb13-cuda launcher/scripts/build.sh \
  -DITERTIME_WITH_CUDA=ON -DITERTIME_BUILD_TESTS=ON -DITERTIME_BUILD_BENCHMARKS=ON "${linker[@]}" "$@"
rc=$?
echo "cuda-compile-check: time build: $(elapsed "$t0") (exit status $rc)"
exit "$rc"
'
exec "$CHECKOUT/launcher/scripts/debian13.sh" -- bash -c "$INSIDE" cuda-compile-check \
  "${ITERTIME_CUDNN_DOWNLOAD:-0}" "$@"
