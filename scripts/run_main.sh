#!/usr/bin/env bash
# Builds ember and runs the main job: a ResNet-18 (small-image stem) trained on Fashion-MNIST,
# Debian's dataset-fashion-mnist package (examples/train_resnet.cpp). On a GPU: 10 epochs on all
# 60,000 images; it fails unless the test top-1 reaches 92%. Without one, a short run that
# finishes in a few minutes on 2 cores: 3 epochs on 2,048 images, failing under 65%. The
# checkpoint, the metrics (JSON lines) and their plot land in runs/fashion-mnist/. Extra
# arguments go to the trainer (train_resnet --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh -DEMBER_BUILD_TESTS=OFF -DEMBER_BUILD_BENCHMARKS=OFF
data=$(bash scripts/fetch_fashion_mnist.sh)
out=runs/fashion-mnist
if nvidia-smi -L > /dev/null 2>&1; then
  job=(--epochs 10 --min-accuracy 0.92)
else
  job=(--device cpu --limit-train 2048 --limit-test 1000 --epochs 3 --batch-size 64 --workers 1 --min-accuracy 0.65)
fi
"${BUILD_DIR:-build}/examples/train_resnet" --dataset fashion-mnist --data-dir "$data" \
  --checkpoint "$out/ckpt.safetensors" "${job[@]}" "$@"
# The plot needs matplotlib: Debian's, for Debian's python3 when the python3 on the PATH (a
# virtual environment, pyenv) lacks it. The run is what counts: no matplotlib, no picture.
py=python3
if ! $py -c 'import matplotlib' 2> /dev/null; then
  SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-matplotlib > /dev/null 2>&1 || true
  py=/usr/bin/python3
fi
$py tools/plot_metrics.py "$out/metrics.jsonl" 2> /dev/null || echo "run_main: no plot (matplotlib missing)"
