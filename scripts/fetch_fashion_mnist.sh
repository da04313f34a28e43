#!/usr/bin/env bash
# Installs Fashion-MNIST from Debian's dataset-fashion-mnist package when it is missing (60,000
# train and 10,000 test images, IDX files) and prints its folder.
set -euo pipefail
dir=/usr/share/datasets/fashion-mnist
if [ ! -s "$dir/train-images-idx3-ubyte.gz" ]; then
  SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq dataset-fashion-mnist >&2
fi
echo "$dir"
