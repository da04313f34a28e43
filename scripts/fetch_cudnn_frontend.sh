#!/usr/bin/env bash
# Puts cudnn_frontend's headers (NVIDIA, MIT; the C++ API PyTorch reaches cuDNN's fused attention
# through) at $EMBER_DATA/cudnn_frontend/include, where CMake looks for them, and prints that folder.
# They come from PyPI's nvidia-cudnn-frontend wheel (downloaded, not installed; the headers are the
# same in every wheel of a version, so one wheel is named whatever this Python is).
set -euo pipefail
version=1.32.0
dir=${EMBER_DATA:-$HOME/.cache/ember}/cudnn_frontend
if [ "$(cat "$dir/VERSION" 2>/dev/null)" != "$version" ]; then
  command -v unzip > /dev/null || apt-get install -y -qq unzip > /dev/null
  python3 -m pip --version > /dev/null 2>&1 || apt-get install -y -qq python3-pip > /dev/null
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_28_x86_64 -d "$tmp" "nvidia-cudnn-frontend==$version" >&2
  unzip -q -o "$tmp"/nvidia_cudnn_frontend-*.whl 'include/*' -d "$tmp/wheel"
  rm -rf "$dir"
  mkdir -p "$dir"
  mv "$tmp/wheel/include" "$dir/include"
  echo "$version" > "$dir/VERSION"
fi
echo "$dir"
