#!/usr/bin/env bash
# Builds one fuzzer with clang (libFuzzer, ASan, UBSan) into ${BUILD_DIR:-build-fuzz} and runs it
# for SECONDS (default 60) on one core:  bash scripts/fuzz.sh [TARGET] [SECONDS] [libFuzzer flags...]
# TARGET is one of tools/fuzz/targets.cpp (default safetensors): safetensors, idx, cifar, csv,
# vocab, tokenizer_config, bert_config, png, jpeg. New interesting inputs go to
# $BUILD_DIR/fuzz-corpus/TARGET; crashes to $BUILD_DIR/fuzz-artifacts/TARGET (add each to
# tools/fuzz/corpus/TARGET, and as a regression test next to the reader's tests).
set -euo pipefail
cd "$(dirname "$0")/.."
target=safetensors
if [[ $# -gt 0 && ! $1 =~ ^[0-9]+$ && $1 != -* ]]; then
  target=$1
  shift
fi
seconds=${1:-60}
shift || true
BUILD_DIR=${BUILD_DIR:-build-fuzz}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# The library itself is built unoptimized (quick to compile) with ASan and UBSan; the fuzzer
# compiles the readers with -O1, coverage and the sanitizers (tools/fuzz/CMakeLists.txt).
cmake -S . -B "$BUILD_DIR" -G Ninja "${launcher[@]}" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DEMBER_SANITIZE=ON \
  -DEMBER_CUDA=OFF -DEMBER_BUILD_TESTS=OFF -DEMBER_BUILD_BENCHMARKS=OFF -DEMBER_BUILD_EXAMPLES=OFF \
  -DEMBER_BUILD_FUZZERS=ON
cmake --build "$BUILD_DIR" -j "${JOBS:-2}" --target "${target}_fuzz"
corpus=$BUILD_DIR/fuzz-corpus/$target
artifacts=$BUILD_DIR/fuzz-artifacts/$target
mkdir -p "$corpus" "$artifacts"
dict=()
[[ -f tools/fuzz/$target.dict ]] && dict=(-dict="tools/fuzz/$target.dict")
# The first corpus folder receives new inputs; the seeds in tools/fuzz/corpus stay as they are.
OMP_NUM_THREADS=1 "$BUILD_DIR/tools/fuzz/${target}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  "${dict[@]}" -artifact_prefix="$artifacts/" -print_final_stats=1 "$@" "$corpus" "tools/fuzz/corpus/$target"
