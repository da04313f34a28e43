#!/usr/bin/env bash
# Builds ember and runs every test that this machine can run (the `cuda` label needs a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
# Tests and benchmarks are switched on explicitly: the build dir may come from run_main.sh, which
# configures it without them, and CMake keeps a cached option until told otherwise.
bash scripts/build.sh -DEMBER_BUILD_TESTS=ON -DEMBER_BUILD_BENCHMARKS=ON "$@"
# One test at a time: each test already uses every core through OpenMP, and two processes of
# spinning OpenMP threads on the same cores slow each other down by orders of magnitude.
# A run that finds no test fails: it would otherwise pass having checked nothing.
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure --no-tests=error
