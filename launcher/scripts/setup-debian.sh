#!/usr/bin/env bash
# Installs every dependency of itertime on Debian 12 (bookworm) or Debian 13 (trixie) with apt-get;
# the release is read from /etc/os-release, any other system is refused (exit 2).
# Idempotent and non-interactive: when every package is installed already, apt is not called.
# Usage: launcher/scripts/setup-debian.sh [--cuda]   (as root, or with sudo available)
#   --cuda, or ITERTIME_TORCH_PACKAGE=libtorch-cuda-dev: LibTorch built with CUDA instead of the CPU
#     one, plus NCCL (libnccl-dev) and nvcc (nvidia-cuda-toolkit). Debian 13 only (Debian 12 has
#     neither libtorch-cuda-dev nor libnccl-dev), and apt's sources need contrib and non-free.
#     libtorch-cuda-dev conflicts with libtorch-dev: apt replaces one with the other. It depends on
#     nvidia-cudnn, whose install script downloads cuDNN from NVIDIA once its licence is agreed to
#     (debconf nvidia-cudnn/question; non-interactive installs take its default, "I Agree").
set -euo pipefail

# ---- the release -------------------------------------------------------------------------------
ID="" VERSION_ID="" VERSION_CODENAME="" PRETTY_NAME="a system without /etc/os-release"
# shellcheck disable=SC1091
[ -r /etc/os-release ] && . /etc/os-release
case "$ID:$VERSION_ID:$VERSION_CODENAME" in
  debian:12:*|debian::bookworm) RELEASE=12 ;;
  debian:13:*|debian::trixie) RELEASE=13 ;;
  *)
    echo "setup-debian: unsupported system ($PRETTY_NAME): Debian 12 (bookworm) or 13 (trixie) only" >&2
    exit 2 ;;
esac

# ---- which LibTorch ----------------------------------------------------------------------------
TORCH_PACKAGE="${ITERTIME_TORCH_PACKAGE:-libtorch-dev}"
for arg in "$@"; do
  case "$arg" in
    --cuda) TORCH_PACKAGE=libtorch-cuda-dev ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup-debian: unknown argument '$arg' (--cuda or nothing)" >&2; exit 2 ;;
  esac
done

# ---- the packages ------------------------------------------------------------------------------
# The names are the same on Debian 12 and 13 (checked with apt-cache on both: libopenblas0,
# libcli11-dev, libbenchmark-dev, libboost-serialization-dev and the rest all exist).
PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  openmpi-bin libopenmpi-dev
  "$TORCH_PACKAGE" libopenblas0 libopenblas-dev
  libhdf5-dev hdf5-tools
  libboost-serialization-dev
  libnlopt-dev                        # the fits' bounded minimizer (common/regularized_fit.hpp)
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev
  libyaml-cpp-dev libtomlplusplus-dev libssl-dev
  jq
  pybind11-dev python3-dev            # the Python module (docs/python.md): pybind11 2.10 / 2.13, Python 3.11 / 3.13
  python3-venv python3-pip python3-setuptools python3-wheel  # `pip install --no-build-isolation .` (pyproject.toml)
  iproute2                            # the emulated cluster (docs/cluster.md): ip netns, veth, tc (HTB)
)
# Per-release differences, all of them here.
case "$RELEASE:$TORCH_PACKAGE" in
  *:libtorch-dev) ;;
  13:libtorch-cuda-dev) PACKAGES+=(libnccl-dev nvidia-cuda-toolkit) ;;   # contrib, non-free
  12:libtorch-cuda-dev)
    echo "setup-debian: the CUDA LibTorch (libtorch-cuda-dev) and libnccl-dev exist on Debian 13 only" >&2
    exit 2 ;;
  *)
    echo "setup-debian: ITERTIME_TORCH_PACKAGE must be libtorch-dev or libtorch-cuda-dev (got '$TORCH_PACKAGE')" >&2
    exit 2 ;;
esac

# ---- install what is missing -------------------------------------------------------------------
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup-debian: Debian $RELEASE: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

echo "setup-debian: Debian $RELEASE: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
unknown=()
for p in "${missing[@]}"; do
  apt-cache show "$p" >/dev/null 2>&1 || unknown+=("$p")
done
if [ "${#unknown[@]}" -gt 0 ]; then
  echo "setup-debian: apt knows no package ${unknown[*]}; enable the components they are in" \
       "(contrib and non-free for the CUDA ones) in /etc/apt/sources.list{,.d/}" >&2
  exit 1
fi
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
