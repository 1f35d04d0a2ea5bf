#!/usr/bin/env bash
# Configures and builds itertime into ${ITERTIME_BUILD_DIR:-build} (Release-with-debug-info, Ninja).
# Extra arguments go to the CMake configure step, e.g. -DITERTIME_WITH_CUDA=OFF.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${ITERTIME_BUILD_DIR:-$ROOT/build}"
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja "$@"
cmake --build "$BUILD_DIR" --parallel "$(nproc)"
