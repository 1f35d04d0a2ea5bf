#!/usr/bin/env bash
# Configures and builds itertime into ${ITERTIME_BUILD_DIR:-build} (Release-with-debug-info, Ninja).
#
#   build.sh [--torch LOCATION] [CMAKE ARGS...]
#
# --torch LOCATION (or ITERTIME_TORCH=LOCATION) picks the LibTorch to build against (docs/build.md):
#   - a folder holding TorchConfig.cmake (a Torch_DIR);
#   - a prefix holding share/cmake/Torch (an unpacked LibTorch archive), lib/<arch>/cmake/Torch or Torch/;
#   - python, python3 or the path of a Python: the PyTorch installed in that Python, found with
#     torch.utils.cmake_prefix_path. If that Python also has the nvidia-nccl-cu12/cu13 wheel
#     (site-packages/nvidia/nccl) and NCCL_HOME is unset, its NCCL is passed to CMake too.
# Without it, CMake's own search finds Debian's libtorch-dev. It passes -DTorch_DIR=... to CMake.
# Exit status 2, with one line on stderr, when LOCATION holds no TorchConfig.cmake, the Python has no
# torch, or the build folder was configured with another LibTorch.
# The remaining arguments go to the CMake configure step, e.g. -DITERTIME_WITH_CUDA=OFF.
# ITERTIME_BUILD_TARGETS (space-separated, default: all) limits what is built, e.g. "itertime".
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${ITERTIME_BUILD_DIR:-$ROOT/build}"

die() {
  echo "build.sh: error: $*" >&2
  exit 2
}

TORCH="${ITERTIME_TORCH:-}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --torch) [[ $# -ge 2 ]] || die "--torch needs a LOCATION (a Torch_DIR, a LibTorch folder, or python3)"
             TORCH="$2"; shift 2 ;;
    --torch=*) TORCH="${1#--torch=}"; shift ;;
    -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done

# The folder holding TorchConfig.cmake under $1, or nothing.
torch_config_dir() {
  local d
  for d in "$1" "$1/Torch" "$1/share/cmake/Torch" "$1/lib/cmake/Torch" "$1"/lib/*/cmake/Torch; do
    if [[ -f "$d/TorchConfig.cmake" ]]; then
      (cd "$d" && pwd -P)
      return 0
    fi
  done
}

TORCH_ARGS=()
if [[ -n "$TORCH" ]]; then
  TORCH_DIR=""
  if [[ "$TORCH" == python || "$TORCH" == python3 || ( ! -d "$TORCH" && "$(basename -- "$TORCH")" == python* ) ]]; then
    PYTHON="$TORCH"
    command -v "$PYTHON" > /dev/null 2>&1 || die "--torch $TORCH: no such Python ($PYTHON not found)"
    # Line 1 is the documented CMake prefix; the key=value lines after it are optional extras.
    ERR="$(mktemp)"
    if ! QUERY="$("$PYTHON" -c '
import os, torch, torch.utils
print(torch.utils.cmake_prefix_path)
print("version=" + torch.__version__)
print("cuda=" + str(torch.version.cuda))
print("cxx11_abi=" + str(int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", 1))))
print("site=" + os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__))))
' 2> "$ERR")"; then
      REASON="$(tail -n 1 "$ERR")"
      rm -f "$ERR"
      die "--torch $TORCH: $(command -v "$PYTHON") has no usable torch (${REASON:-import torch failed}); pip install torch, or pass a LibTorch folder"
    fi
    rm -f "$ERR"
    PREFIX="$(sed -n 1p <<< "$QUERY")"
    field() { local v; v="$(sed -n "s/^$1=//p" <<< "$QUERY")"; echo "${v:-unknown}"; }
    TORCH_DIR="$(torch_config_dir "$PREFIX")"
    [[ -n "$TORCH_DIR" ]] || die "--torch $TORCH: no TorchConfig.cmake under torch.utils.cmake_prefix_path (${PREFIX:-empty})"
    echo "build.sh: PyTorch $(field version) of $(command -v "$PYTHON") (CUDA $(field cuda), C++11 ABI $(field cxx11_abi)): Torch_DIR=$TORCH_DIR"
    [[ "$(field cxx11_abi)" != 0 ]] || die "--torch $TORCH: this PyTorch uses the pre-C++11 libstdc++ ABI, itertime the C++11 ABI; use torch >= 2.7 (docs/build.md)"
    SITE="$(sed -n 's/^site=//p' <<< "$QUERY")"
    NCCL_WHEEL="$SITE/nvidia/nccl"
    if [[ -n "$SITE" && -f "$NCCL_WHEEL/include/nccl.h" ]]; then
      if [[ -n "${NCCL_HOME:-}" ]]; then
        echo "build.sh: NCCL_HOME=$NCCL_HOME is set; not using the NCCL wheel at $NCCL_WHEEL"
      else
        # The wheel ships libnccl.so.2 without the libnccl.so link find_library looks for: name both.
        NCCL_LIB=""
        for lib in "$NCCL_WHEEL"/lib/libnccl.so "$NCCL_WHEEL"/lib/libnccl.so.[0-9]*; do
          if [[ -e "$lib" ]]; then NCCL_LIB="$lib"; break; fi
        done
        if [[ -n "$NCCL_LIB" ]]; then
          export NCCL_HOME="$NCCL_WHEEL"
          TORCH_ARGS+=("-DNCCL_INCLUDE_DIR=$NCCL_WHEEL/include" "-DNCCL_LIBRARY=$NCCL_LIB")
          echo "build.sh: NCCL_HOME=$NCCL_HOME (the nvidia-nccl wheel): -DNCCL_LIBRARY=$NCCL_LIB"
        fi
      fi
    fi
  elif [[ -d "$TORCH" ]]; then
    TORCH_DIR="$(torch_config_dir "$TORCH")"
    [[ -n "$TORCH_DIR" ]] || die "--torch $TORCH: no TorchConfig.cmake there (nor in Torch/, share/cmake/Torch/, lib/*/cmake/Torch/)"
    echo "build.sh: Torch_DIR=$TORCH_DIR"
  else
    die "--torch $TORCH: no such folder, and not python/python3"
  fi
  # A build folder caches the LibTorch it found (libraries, Caffe2_DIR): switching needs a fresh one.
  if [[ -f "$BUILD_DIR/CMakeCache.txt" ]]; then
    CACHED="$(sed -n 's/^Torch_DIR:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")"
    if [[ -n "$CACHED" && "$CACHED" != *-NOTFOUND && "$(cd "$CACHED" 2> /dev/null && pwd -P)" != "$TORCH_DIR" ]]; then
      die "$BUILD_DIR was configured with the LibTorch at $CACHED; use another ITERTIME_BUILD_DIR or delete it"
    fi
  fi
  TORCH_ARGS+=("-DTorch_DIR=$TORCH_DIR")
fi

cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja ${TORCH_ARGS[@]+"${TORCH_ARGS[@]}"} "$@"
TARGET_ARGS=()
for target in ${ITERTIME_BUILD_TARGETS:-}; do TARGET_ARGS+=(--target "$target"); done
cmake --build "$BUILD_DIR" --parallel "$(nproc)" ${TARGET_ARGS[@]+"${TARGET_ARGS[@]}"}
