#!/usr/bin/env bash
# Puts the 8x8 handwritten digits (UCI ML digits, 1797 images, as scikit-learn ships them) at
# $EMBER_DATA/digits.csv and prints that path. Taken from an installed scikit-learn when there
# is one, else from scikit-learn's wheel on PyPI (downloaded, not installed).
set -euo pipefail
dir=${EMBER_DATA:-$HOME/.cache/ember}
mkdir -p "$dir"
if [ ! -s "$dir/digits.csv" ]; then
  src=$(python3 -c 'import sklearn, os; print(os.path.join(os.path.dirname(sklearn.__file__), "datasets/data/digits.csv.gz"))' 2>/dev/null || true)
  if [ -z "$src" ] || [ ! -f "$src" ]; then
    command -v unzip > /dev/null || apt-get install -y -qq unzip > /dev/null
    python3 -m pip --version > /dev/null 2>&1 || apt-get install -y -qq python3-pip > /dev/null
    tmp=$(mktemp -d)
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" scikit-learn >&2
    unzip -q -o -j "$tmp"/scikit_learn-*.whl 'sklearn/datasets/data/digits.csv.gz' -d "$tmp"
    src=$tmp/digits.csv.gz
  fi
  gunzip -c "$src" > "$dir/digits.csv.tmp" && mv "$dir/digits.csv.tmp" "$dir/digits.csv"
fi
echo "$dir/digits.csv"
