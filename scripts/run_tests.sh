#!/usr/bin/env bash
# Builds ember and runs every test that this machine can run (the `cuda` label needs a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh "$@"
# One test at a time: each test already uses every core through OpenMP, and two processes of
# spinning OpenMP threads on the same cores slow each other down by orders of magnitude.
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure
