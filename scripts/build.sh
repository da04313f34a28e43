#!/usr/bin/env bash
# Configures and builds ember into ${BUILD_DIR:-build}; extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
BUILD_DIR=${BUILD_DIR:-build}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$BUILD_DIR" -G Ninja "${launcher[@]}" "$@"
cmake --build "$BUILD_DIR" -j "$(nproc)"
