#!/usr/bin/env bash
# Builds ember and runs the main job: a small CNN trained on the 8x8 handwritten digits (scikit-
# learn's copy of the UCI set), on the GPU when there is one, else the CPU; it fails unless the
# test accuracy reaches 95%.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh -DEMBER_BUILD_TESTS=OFF -DEMBER_BUILD_BENCHMARKS=OFF
command -v python3 > /dev/null || apt-get install -y -qq python3 python3-pip > /dev/null
data=$(bash scripts/fetch_digits.sh)
"${BUILD_DIR:-build}/examples/train_digits" --data "$data" "$@"
