#!/usr/bin/env bash
# Builds the safetensors fuzzer with clang (libFuzzer, ASan, UBSan) into ${BUILD_DIR:-build-fuzz}
# and runs it for SECONDS (default 60) on one core:  bash scripts/fuzz.sh [SECONDS] [libFuzzer flags...]
# New interesting inputs go to $BUILD_DIR/fuzz-corpus; crashes to $BUILD_DIR/fuzz-artifacts
# (add each as a regression test in tests/core/test_serialize.cpp).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
BUILD_DIR=${BUILD_DIR:-build-fuzz}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# The library itself is built unoptimized (quick to compile); the fuzzer compiles the reader
# with -O1 and the sanitizers (tools/fuzz/CMakeLists.txt).
cmake -S . -B "$BUILD_DIR" -G Ninja "${launcher[@]}" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG=-O0 \
  -DEMBER_CUDA=OFF -DEMBER_BUILD_TESTS=OFF -DEMBER_BUILD_BENCHMARKS=OFF -DEMBER_BUILD_EXAMPLES=OFF \
  -DEMBER_BUILD_FUZZERS=ON
cmake --build "$BUILD_DIR" -j "${JOBS:-2}" --target safetensors_fuzz
mkdir -p "$BUILD_DIR/fuzz-corpus" "$BUILD_DIR/fuzz-artifacts"
# The first corpus folder receives new inputs; the seeds in tools/fuzz/corpus stay as they are.
OMP_NUM_THREADS=1 "$BUILD_DIR/tools/fuzz/safetensors_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -dict=tools/fuzz/safetensors.dict -artifact_prefix="$BUILD_DIR/fuzz-artifacts/" -print_final_stats=1 "$@" \
  "$BUILD_DIR/fuzz-corpus" tools/fuzz/corpus
