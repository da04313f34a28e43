#!/usr/bin/env bash
# Builds ember and runs every test that this machine can run (the `cuda` label needs a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh "$@"
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
