#!/usr/bin/env bash
# Installs what building ember needs from Debian's packages (skips apt when all are present).
set -euo pipefail
pkgs=(cmake ninja-build g++ libeigen3-dev libgtest-dev libbenchmark-dev libgloo-dev zlib1g-dev libpng-dev libjpeg-dev nlohmann-json3-dev
  libutf8proc-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
# cuDNN's fused attention needs cudnn_frontend's headers: optional (ember builds without them),
# so a machine that cannot reach PyPI still builds.
if command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  bash "$(dirname "$0")/fetch_cudnn_frontend.sh" > /dev/null ||
    echo "install_deps: cudnn_frontend not fetched; building without cuDNN's fused attention" >&2
fi
