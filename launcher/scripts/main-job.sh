#!/usr/bin/env bash
# The README's main job: installs the dependencies (apt-get), builds, and runs the local end-to-end
# calibration, ground truth, fit and validation on CPU ranks (jobs/local-cpu.json), ending with the MAPE
# table. Output: out/local-cpu.h5 and out/local-cpu-validation/ (CSV, JSON, SVG, fitted model).
# Rerunning continues the same file (every stage resumes); delete out/ to start over.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
"$ROOT/launcher/scripts/setup-debian.sh"
# A build folder of its own (no tests), so that the test command's build keeps its settings.
export ITERTIME_BUILD_DIR="${ITERTIME_BUILD_DIR:-$ROOT/build-main}"
"$ROOT/launcher/scripts/build.sh" -DITERTIME_BUILD_TESTS=OFF -DITERTIME_BUILD_BENCHMARKS=OFF
BUILD_DIR="$ITERTIME_BUILD_DIR"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$ROOT/out"
"$BUILD_DIR/launcher/itertime" info
exec "$BUILD_DIR/launcher/itertime" run "$ROOT/jobs/local-cpu.json" -o "$ROOT/out/local-cpu.h5" "$@"
