#!/usr/bin/env bash
# Issues 8 and 27 in one device call on a machine with N >= 2 GPUs (N from nvidia-smi): every
# collective and DistributedDataParallel at world N over NCCL, fault drills, all-reduce bandwidth
# next to PyTorch's, DDP's cost per step, tensor x pipeline x data parallel training. Builds what it runs in $BUILD_DIR (build-device, as
# scripts/device_check.sh; configured the same way when missing). Logs go to $OUT (9 files at
# most); a short table is printed last. Exits non-zero when a check failed.
#
#   scripts/multi_gpu_check.sh
#   BACKEND=gloo DEVICE=cpu NPROC=2 BUILD_DIR=build PYTHON=/work/torchref/bin/python \
#     scripts/multi_gpu_check.sh          # dry run on the CPU
#
# Steps:
#   collectives  tools/collectives_check at world N
#   ddp_check    tools/ddp_check at world N (DDP f32 and bf16, no_sync, SyncBatchNorm)
#   kill9        kill -9 one rank of tools/allreduce_loop mid all-reduce: emberrun must exit within
#                30 s, leave no process behind, and (GPUs) no process holding GPU memory
#   sigstop      SIGSTOP one rank: the others' all-reduce fails after the group's timeout
#                (FAULT_TIMEOUT_S, 10) with an error naming the collective and the rank
#   allreduce    allreduce_bench under emberrun next to torch_allreduce_bench.py under torchrun
#   ddp_bench    ddp_bench at world 1 and N: step time without and with DDP
#   parallel     examples/train_bert_parallel at world N on each mesh N allows (TP N, with and without
#                --sequence-parallel; PP 2 x TP N/2; DP 2 x PP 2 x TP N/4 from 8 GPUs) against one
#                process: the losses within 1e-3
#   scaling      weak scaling of a ResNet-50 (b128) and a BERT-base (b32 s128) bf16 training step:
#                scaling_bench under emberrun and torch_scaling_bench.py under torchrun at world 1
#                and N; efficiency = samples/s at N / (N * samples/s at 1) for each side, and the
#                ratio ember / PyTorch. SCALING=0 skips it, SCALING=only runs nothing else;
#                SCALING_ARGS replaces --warmup 10 --iters 20 (add --channels-last for NHWC ResNets).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/ember-multi-gpu}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build-device}
BACKEND=${BACKEND:-nccl}
DEVICE=${DEVICE:-cuda}
PYTHON=${PYTHON:-python3}
FAULT_TIMEOUT_S=${FAULT_TIMEOUT_S:-10}
SCALING=${SCALING:-1}
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on the shared machines
gpu=0
[ "$DEVICE" = cuda ] && gpu=1

if [ -n "${NPROC:-}" ]; then
  N=$NPROC
elif [ $gpu = 1 ]; then
  N=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ')
else
  N=2
fi
if [ "${N:-0}" -lt 2 ]; then
  echo "multi_gpu_check: needs at least 2 GPUs, nvidia-smi lists ${N:-0}" >&2
  exit 2
fi
echo "multi_gpu_check: world $N, $BACKEND on $DEVICE, build in $BUILD_DIR, logs in $OUT"

# --- Build (incremental: only the programs this script runs) ---
targets="emberrun collectives_check ddp_check allreduce_loop allreduce_bench ddp_bench train_bert_parallel"
[ "$SCALING" = 0 ] || targets+=" scaling_bench"
[ "$SCALING" = only ] && targets="emberrun scaling_bench"
{
  [ $gpu = 1 ] && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 || exit 1
  fi
  # shellcheck disable=SC2086  # a list of targets
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target $targets
} > "$OUT/build.log" 2>&1
build_rc=$?
EMBERRUN=$BUILD_DIR/tools/emberrun/emberrun
TOOLS=$BUILD_DIR/tools
if [ $build_rc -ne 0 ]; then
  grep -E "error" "$OUT/build.log" | head -30
  echo "multi_gpu_check: build failed (rc=$build_rc, see $OUT/build.log)" >&2
  exit 1
fi

summary=()
failed=0
# record NAME OK(0/1) TEXT
record() {
  local status=PASS
  [ "$2" = 1 ] || { status=FAIL; failed=1; }
  summary+=("$(printf '%-12s %s %s' "$1" "$status" "$3")")
  echo "$1: $status $3"
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
run() { "$EMBERRUN" --nproc-per-node "$1" --master-port 0 "${@:2}"; }

# --- (f) weak scaling, ember and PyTorch (run last, or alone with SCALING=only) ---
scaling_step() {
  local models="resnet50 bert-base" args=${SCALING_ARGS:---warmup 10 --iters 20} model world margs
  local ember_rows=$OUT/.scaling_ember.jsonl torch_rows=$OUT/.scaling_torch.jsonl
  : > "$ember_rows"
  : > "$torch_rows"
  # On the CPU (a dry run): ResNet-18 on 32x32 images and a 2-layer BERT of width 64.
  [ $gpu = 1 ] || { models="resnet18 bert-base"; args=${SCALING_ARGS:---warmup 1 --iters 2}; }
  echo "==== scaling" >> "$OUT/bench.log"
  for model in $models; do
    margs=""
    if [ $gpu = 0 ]; then
      margs="--batch 2 --image-size 32"
      [ "$model" = bert-base ] && margs="--batch 2 --seq 16 --layers 2 --d-model 64 --heads 4 --ffn 128 --vocab 100"
    fi
    for world in 1 "$N"; do
      # shellcheck disable=SC2086  # lists of arguments
      {
        run "$world" "$TOOLS/bench/scaling_bench" --device "$DEVICE" --model "$model" $margs $args >> "$ember_rows"
        "$PYTHON" -m torch.distributed.run --standalone --nproc-per-node "$world" tools/bench/torch_scaling_bench.py \
          --device "$DEVICE" --model "$model" $margs $args >> "$torch_rows"
      } 2>> "$OUT/bench.log"
    done
  done
  cat "$ember_rows" "$torch_rows" >> "$OUT/bench.log"
  local table
  table=$(python3 tools/bench/scaling_table.py "$ember_rows" "$torch_rows" "$N")
  echo "$table" | tee -a "$OUT/bench.log"
  local ember_n torch_n
  ember_n=$(grep -c '"case"' "$ember_rows")
  torch_n=$(grep -c '"case"' "$torch_rows")
  rm -f "$ember_rows" "$torch_rows"
  record scaling "$([ "$ember_n" -ge 4 ] && echo 1)" \
    "$ember_n ember and $torch_n torch runs: $(echo "$table" | tail -n +2 | tr -s ' ' | tr '\n' ';' | cut -c1-300)"
}
print_summary() {
  {
    echo "---- multi_gpu_check summary (world $N, $BACKEND, $DEVICE)"
    printf '%s\n' "${summary[@]}"
  } | tee "$OUT/summary.txt"
}
if [ "$SCALING" = only ]; then
  : > "$OUT/bench.log"
  scaling_step
  print_summary
  exit $failed
fi

# --- (a) every collective ---
run "$N" "$TOOLS/collectives_check" --backend "$BACKEND" > "$OUT/collectives_check.log" 2>&1
rc=$?
passes=$(grep -c '\]: PASS ' "$OUT/collectives_check.log")
fails=$(grep -oE '\]: FAIL [a-z_/]+' "$OUT/collectives_check.log" | sed 's/.*FAIL //' | tr '\n' ' ')
record collectives "$([ $rc = 0 ] && [ "$passes" -ge 8 ] && echo 1)" "rc=$rc $passes passed${fails:+, failed: $fails}"

# --- (b) DDP and SyncBatchNorm against one process on the whole batch ---
# shellcheck disable=SC2086  # DDP_CHECK_ARGS is a list of arguments
run "$N" "$TOOLS/ddp_check" --backend "$BACKEND" --device "$DEVICE" ${DDP_CHECK_ARGS:-} \
  > "$OUT/ddp_check.log" 2>&1
rc=$?
lines=$(grep -oE '(PASS|FAIL) [a-z0-9_]+ max_diff=[^ ]+' "$OUT/ddp_check.log" |
  sed -E 's/^(PASS|FAIL) ([a-z0-9_]+) max_diff=/\2(\1)=/' | tr '\n' ' ')
record ddp_check "$([ $rc = 0 ] && [ "$(grep -c '\]: PASS ' "$OUT/ddp_check.log")" -ge 4 ] && echo 1)" \
  "rc=$rc $lines"

# --- (c) faults, on allreduce_loop (64 MiB all-reduces on GPUs, 4 KiB on the CPU) ---
FAULTS=$OUT/faults.log
: > "$FAULTS"
loop_numel=$((16 << 20))
[ $gpu = 1 ] || loop_numel=1024
# Starts the loop in the background (sets job, job_log); waits until every rank runs.
start_loop() {
  job_log=$OUT/.loop_$1.log
  : > "$job_log"
  "$EMBERRUN" --nproc-per-node "$N" --master-port 0 --grace-period 3 "$TOOLS/allreduce_loop" \
    --backend "$BACKEND" --numel "$loop_numel" --timeout-s "$FAULT_TIMEOUT_S" --seconds 120 > "$job_log" 2>&1 &
  job=$!
  local deadline=$((SECONDS + 90))
  while [ "$(grep -c ': allreduce_loop: rank [0-9]* running' "$job_log")" -lt "$N" ] && [ $SECONDS -lt $deadline ]; do
    kill -0 "$job" 2> /dev/null || break
    sleep 0.2
  done
  workers=$(pgrep -P "$job" | tr '\n' ' ')
}
# The pid of the job's worker with RANK=$1.
rank_pid() {
  local p
  for p in $workers; do
    if tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "RANK=$1"; then
      echo "$p"
      return
    fi
  done
}
# Waits up to $1 s for the job to exit; sets job_rc (-1: still running, then killed) and job_s.
wait_job() {
  local t0=$2 deadline=$((SECONDS + $1)) rc
  job_rc=0
  while kill -0 "$job" 2> /dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
  job_s=$(since "$t0")
  if kill -0 "$job" 2> /dev/null; then
    job_rc=-1
    kill -9 "$job" 2> /dev/null
    for p in $workers; do kill -9 "$p" 2> /dev/null; done
  fi
  wait "$job" 2> /dev/null
  rc=$?
  [ "$job_rc" = -1 ] || job_rc=$rc
}
# The workers still alive (or zombies) after the job.
leftovers() {
  local p left=""
  for p in $workers; do [ -e "/proc/$p" ] && left+="$p "; done
  echo "$left$(pgrep -f "$TOOLS/allreduce_loop" | tr '\n' ' ')"
}
victim=$((N - 1))

# kill -9 one rank mid all-reduce.
start_loop kill9
pid=$(rank_pid $victim)
mem_before=""
[ $gpu = 1 ] && mem_before=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | tr '\n' ';')
if [ -n "$pid" ]; then
  sleep 1
  t0=$(now)
  kill -9 "$pid"
  wait_job 40 "$t0"
  sleep 0.5
  left=$(leftovers)
  gpu_left="n/a"
  if [ $gpu = 1 ]; then
    # The driver frees a dead process's memory shortly after it exits.
    for _ in $(seq 50); do
      gpu_left=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader |
        grep -wE "$(echo "$workers" | xargs | tr ' ' '|')" | tr '\n' ';')
      [ -z "$gpu_left" ] && break
      sleep 0.2
    done
  fi
  ok=$(awk -v s="$job_s" -v rc="$job_rc" 'BEGIN { print (s < 30 && rc != -1 && rc != 0) }')
  { [ -z "$left" ] && { [ -z "$gpu_left" ] || [ "$gpu_left" = n/a ]; }; } || ok=0
  record kill9 "$ok" "emberrun exited ${job_s}s after kill -9 of rank $victim (rc=$job_rc), left: ${left:-none}, GPU apps left: ${gpu_left:-none}"
else
  wait_job 0 "$(now)"
  record kill9 0 "the loop did not start (see $FAULTS)"
fi
{
  echo "==== kill -9 rank $victim (workers: $workers; GPU apps before: $mem_before)"
  cat "$job_log"
} >> "$FAULTS"

# SIGSTOP one rank: the others' collective times out after FAULT_TIMEOUT_S.
start_loop sigstop
pid=$(rank_pid $victim)
if [ -n "$pid" ]; then
  t0=$(now)
  kill -STOP "$pid"
  wait_job $((FAULT_TIMEOUT_S + 40)) "$t0"
  left=$(leftovers)
  err=$(grep -m1 -E 'allreduce_loop: rank [0-9]+: .*all_reduce' "$job_log" | sed -E 's/^\[rank [0-9]+\]: //' | cut -c1-200)
  named=0
  echo "$err" | grep -qE "all_reduce #[0-9]+ \(rank [0-9]+ of $N\)" && named=1
  ok=$(awk -v s="$job_s" -v t="$FAULT_TIMEOUT_S" -v rc="$job_rc" -v n="$named" \
    'BEGIN { print (n && rc != -1 && rc != 0 && s >= t && s < t + 30) }')
  [ -z "$left" ] || ok=0
  record sigstop "$ok" "emberrun exited ${job_s}s after SIGSTOP of rank $victim (timeout ${FAULT_TIMEOUT_S}s, rc=$job_rc), left: ${left:-none}; error: ${err:-none}"
else
  wait_job 0 "$(now)"
  record sigstop 0 "the loop did not start (see $FAULTS)"
fi
{
  echo "==== SIGSTOP rank $victim (workers: $workers)"
  cat "$job_log"
} >> "$FAULTS"
rm -f "$OUT"/.loop_*.log

# --- (d) all-reduce bandwidth, ember and PyTorch ---
bench_args=${ALLREDUCE_ARGS:-}
[ $gpu = 1 ] || bench_args=${ALLREDUCE_ARGS:---max-bytes 4194304 --iters 5 --warmup 1}
# shellcheck disable=SC2086  # lists of arguments
{
  run "$N" "$TOOLS/bench/allreduce_bench" --backend "$BACKEND" $bench_args > "$OUT/allreduce_ember.jsonl"
  ember_rc=$?
  "$PYTHON" -m torch.distributed.run --standalone --nproc-per-node "$N" tools/bench/torch_allreduce_bench.py \
    --backend "$BACKEND" $bench_args > "$OUT/allreduce_torch.jsonl"
  torch_rc=$?
  echo "ember rc=$ember_rc torch rc=$torch_rc"
  python3 tools/bench/compare.py "$OUT/allreduce_ember.jsonl" "$OUT/allreduce_torch.jsonl"
} > "$OUT/bench.log" 2>&1
sed -n '/^ember rc=/,$p' "$OUT/bench.log"
echo "==== ddp_bench" >> "$OUT/bench.log"
ember_cases=$(grep -c '"case"' "$OUT/allreduce_ember.jsonl")
torch_cases=$(grep -c '"case"' "$OUT/allreduce_torch.jsonl")
largest=$(grep -E '^(f32|bf16|all_reduce)' "$OUT/bench.log" | grep f32 | tail -1 | tr -s ' ')
record allreduce "$([ "$ember_cases" -gt 0 ] && echo 1)" \
  "$ember_cases ember cases, $torch_cases torch cases; largest f32: ${largest:-none}"

# --- (e) DDP's cost per step at world 1 and N ---
ddp_models="mlp transformer"
ddp_args=${DDP_BENCH_ARGS:-}
[ $gpu = 1 ] || { ddp_models=mlp; ddp_args=${DDP_BENCH_ARGS:---width 64 --layers 2 --iters 5}; }
for model in $ddp_models; do
  for world in 1 "$N"; do
    # shellcheck disable=SC2086  # a list of arguments
    run "$world" "$TOOLS/bench/ddp_bench" --device "$DEVICE" --model "$model" $ddp_args >> "$OUT/bench.log" 2>&1
  done
done
ddp_lines=$(python3 - "$OUT/bench.log" << 'EOF'
import json, re, sys
for line in open(sys.argv[1]):
    line = re.sub(r"^\[rank \d+\]:\s*", "", line.strip())
    if line.startswith("{"):
        r = json.loads(line)
        print(f"{r['model']} world {r['world']}: step {r['step_ms']:.2f} ms, with DDP {r['step_ddp_ms']:.2f} ms "
              f"(+{r['step_ddp_ms'] - r['step_ms']:.2f}), exposed comm {r['exposed_comm_ms']:.2f} ms, "
              f"hidden {r['hidden_fraction']:.2f}")
EOF
)
echo "$ddp_lines"
record ddp_bench "$([ "$(echo "$ddp_lines" | grep -c world)" -ge 2 ] && echo 1)" \
  "$(echo "$ddp_lines" | grep -c world) runs: $(echo "$ddp_lines" | tr '\n' ';' | cut -c1-300)"

# --- (g) tensor, pipeline and data parallelism against one process ---
bert_parallel=$BUILD_DIR/examples/train_bert_parallel
bp_args="--device $DEVICE --steps 40 --log-every 10 --batch 32 --layers 4 --heads 8 --vocab 1024"
losses() { grep -oE 'step [0-9]+ loss [0-9.]+' "$1" | awk '{ print $4 }' | tr '\n' ' '; }
# shellcheck disable=SC2086  # a list of arguments
"$bert_parallel" $bp_args > "$OUT/parallel.log" 2>&1
one=$(losses "$OUT/parallel.log")
meshes=("--tensor-parallel $N" "--tensor-parallel $N --sequence-parallel")
[ $((N % 2)) = 0 ] && [ "$N" -ge 4 ] && meshes+=("--pipeline-parallel 2 --tensor-parallel $((N / 2))")
[ $((N % 8)) = 0 ] && meshes+=("--pipeline-parallel 2 --tensor-parallel $((N / 4))")
parallel_ok=1
parallel_text="one process: $one;"
for mesh in "${meshes[@]}"; do
  # shellcheck disable=SC2086  # lists of arguments
  run "$N" "$bert_parallel" $bp_args $mesh > "$OUT/.parallel_mesh.log" 2>&1
  rc=$?
  got=$(losses "$OUT/.parallel_mesh.log")
  same=$(awk -v a="$one" -v b="$got" 'BEGIN { n = split(a, x, " "); m = split(b, y, " "); ok = n > 0 && n == m;
    for (i = 1; i <= n && ok; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > 1e-3 * x[i]) ok = 0 } print ok }')
  { [ $rc = 0 ] && [ "$same" = 1 ]; } || parallel_ok=0
  parallel_text+=" $mesh: ${got:-none} (rc=$rc);"
  { echo "==== $mesh"; cat "$OUT/.parallel_mesh.log"; } >> "$OUT/parallel.log"
done
rm -f "$OUT/.parallel_mesh.log"
record parallel "$parallel_ok" "$parallel_text"

[ "$SCALING" = 0 ] || scaling_step

# --- summary ---
print_summary
exit $failed
