#!/usr/bin/env bash
# bless_published_golden.sh [BUILD_DIR]: rewrites tests/data/published-golden.json (the GOLDEN predictions
# of the development rows, data/published/*.json, checked by tests/e2e/test_published_golden.cpp) from
# today's framework model. Run it only for a deliberate change of the model, its kernel figures or the
# published rows, then commit the file with the reason (which rows moved and why); it prints the diff.
# BUILD_DIR: a configured build with tests (default: build-po at the repository root).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build-po}"
cmake --build "$BUILD" --target itertime_published_golden_tests
ITERTIME_BLESS_PUBLISHED_GOLDEN=1 "$BUILD/tests/e2e/itertime_published_golden_tests" --gtest_filter='PublishedGolden.EveryRow*'
"$BUILD/tests/e2e/itertime_published_golden_tests"
git -C "$ROOT" --no-pager diff --stat -- tests/data/published-golden.json
echo "blessed tests/data/published-golden.json: commit it with the reason the predictions moved"
