#!/usr/bin/env bash
# Builds ember and runs the main job: a small training run that shows the loss going down.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh -DEMBER_BUILD_TESTS=OFF -DEMBER_BUILD_BENCHMARKS=OFF
"${BUILD_DIR:-build}/examples/demo"
