#!/usr/bin/env bash
# The demo: fetch WikiText-2 (from the mirror when there is one) and measure every tokenization scheme on it.
set -euo pipefail
BIN=${1:-.venv/bin}
MIRROR=${2:-../shared/data}
REPORT=reports/tokenization-stats/wikitext-2.md

if [ -d "$MIRROR" ]; then
  FETCH=(--mirror "$MIRROR")
  # The offline mirror holds only the first 565 of WikiText-2's 600 train articles: accept it, labelled unverified.
  if [ ! -f "$MIRROR/wikitext-2/wiki.train.tokens" ] && [ -f "$MIRROR/wikitext-2/wiki.train.first565.tokens" ]; then
    FETCH+=(--file "train=$MIRROR/wikitext-2/wiki.train.first565.tokens" --allow-unverified)
  fi
else
  FETCH=()  # download the official archive
fi
"$BIN/bench" data fetch wikitext-2 "${FETCH[@]}"
"$BIN/bench" tokenize stats --dataset wikitext-2 \
  --schemes byte,char,bpe:4096,sp-bpe:4096,sp-unigram:4096,word:33278,word-open:33278 \
  --out "$REPORT"
echo
echo "report: $REPORT"
