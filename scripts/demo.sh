#!/usr/bin/env bash
# The demo: fetch WikiText-2 (from the offline mirror when there is one), run the quick study
# (configs/quick.toml: tiny SHA-RNN, LSTM and Transformer under byte, BPE and word tokenizations),
# and build its report. It ends with where its time went (scripts/demo_split.py).
set -euo pipefail
BIN=${1:-.venv/bin}
MIRROR=${2:-../shared/data}

if [ -d "$MIRROR" ]; then
  FETCH=(--mirror "$MIRROR")
  # The offline mirror holds only the first 565 of WikiText-2's 600 train articles: accept it, labelled unverified.
  if [ ! -f "$MIRROR/wikitext-2/wiki.train.tokens" ] && [ -f "$MIRROR/wikitext-2/wiki.train.first565.tokens" ]; then
    FETCH+=(--file "train=$MIRROR/wikitext-2/wiki.train.first565.tokens" --allow-unverified)
  fi
else
  FETCH=()  # download the official archive
fi
PHASES=$(mktemp)
trap 'rm -f "$PHASES"' EXIT
phase() { echo "$1 $(date +%s.%N)" >> "$PHASES"; }  # when each part ended, for the split printed at the end
phase start
"$BIN/bench" data fetch wikitext-2 "${FETCH[@]}"
phase fetch
# Two runs at a time where there are two cores or more (one thread each).
JOBS=$(( $(nproc 2>/dev/null || echo 1) >= 2 ? 2 : 1 ))
# The report compares the runs with five classical compressors, 40 s of CPU time on WikiText-2: measured
# meanwhile at the lowest priority, on what the runs leave of the cores, and cached for the report.
nice -n 19 "$BIN/bench" baselines wikitext-2 --splits test --quiet > /dev/null 2>&1 &
baselines=$!
trap 'kill "$baselines" 2>/dev/null || true; rm -f "$PHASES"' EXIT  # a demo stopped early leaves nothing running
# The plan trains the tokenizers and encodes the splits (cached for the runs), so that their time is told apart.
"$BIN/bench" run-matrix configs/quick.toml --dry-run > /dev/null
phase tokenizers
"$BIN/bench" run-matrix configs/quick.toml --jobs "$JOBS"
phase runs
if kill -0 "$baselines" 2>/dev/null; then echo "finishing the compressor baselines for the report"; fi
wait "$baselines" || echo "the compressor baselines could not be measured beside the runs; the report measures them"
phase baselines
"$BIN/bench" report results/quick
phase report
# How close this machine came to the reference runs (another machine's; nothing is trained again).
echo "against results/reference/quick-2cpu:"
"$BIN/bench" reproduce results/reference/quick-2cpu --reproduced results/quick --brief \
  || echo "(a difference beyond the tolerance: see bench reproduce results/reference/quick-2cpu --reproduced results/quick)"
phase reproduce
"$BIN/python" scripts/demo_split.py "$PHASES" results/quick
