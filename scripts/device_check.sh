#!/usr/bin/env bash
# One call on the GPU machine (the `device` tool): configure for Hopper, build with ninja, run
# every test, run the benchmarks, print a short table last. Logs go to $OUT when it is set.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/ember-device}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build-device}
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  g++ --version | head -1; cmake --version | head -1; nvcc --version | tail -1
} > "$OUT/env.txt" 2>&1
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/configure.log" 2>&1
configure_rc=$?
cmake --build "$BUILD_DIR" -j "$(nproc)" -- -k 0 > "$OUT/build.log" 2>&1
build_rc=$?
ctest --test-dir "$BUILD_DIR" --output-on-failure > "$OUT/ctest.log" 2>&1
test_rc=$?
bench="$BUILD_DIR/tools/bench/cpu_ops_bench"
[ -x "$bench" ] && "$bench" --benchmark_min_time=0.5 > "$OUT/bench.txt" 2>&1
"$BUILD_DIR/tools/env_report" >> "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
grep -E "CUDA backend|Benchmark" "$OUT/configure.log"
echo "---- summary"
printf '%-10s %s\n' configure "rc=$configure_rc" build "rc=$build_rc (warnings: $(grep -c 'warning:' "$OUT/build.log"))" \
  tests "rc=$test_rc $(grep -E 'tests passed' "$OUT/ctest.log")"
[ -f "$OUT/bench.txt" ] && grep -E "^BM_" "$OUT/bench.txt"
[ $build_rc -eq 0 ] && [ $test_rc -eq 0 ]
