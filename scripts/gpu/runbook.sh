#!/usr/bin/env bash
# The GPU runbook: stages that each end well inside 9 minutes and write what they measure under OUT
# (at most 8 files per stage: what comes back from a lent machine). Rerun any stage on its own.
#
#   scripts/gpu/runbook.sh prove  OUT   # nvidia-smi, versions, bf16 matmul peak, CUDA tests, the whole suite
#   scripts/gpu/runbook.sh diagnose OUT # the study's SHA-RNN cell for about a minute under each precision and
#                                       # attention kernel: its loss, whether it left the unigram floor, chars/s
#   scripts/gpu/runbook.sh speed  OUT   # bench speed: precisions, CUDA graphs, LAMB's loop and foreach, compiled, the
#                                       # small presets, a batch sweep, the reference side by side; one table
#   scripts/gpu/runbook.sh study  OUT   # configs/gpu-wikitext2.toml (resumes where it stopped), then its report
#   scripts/gpu/runbook.sh lease  OUT   # what a 15-minute lease has room for, in one call: a block of the study, its
#                                       # runs' records to commit, then speed rows if the study had nothing left
#
# TINY=1 runs every stage at toy sizes on whatever device there is (the CPU dry run `make test` runs).
# MIRROR: folder with wikitext-2/ (default .gpu/mirror, a copy of ../shared/data that travels to the GPU).
# REFERENCE: folder with Smerity/sha-rnn's model.py for the side-by-side (default .gpu/sha-rnn).
# STUDY_SECONDS: stop starting new study runs after this long (default 480); the next call resumes.
# SPEED_SECONDS: the speed stage starts no measurement after this long (default 400); MEASURE_SECONDS: each one's
# limit (default 120), also the reference side by side's: at most about 8.7 minutes in all.
# DIAGNOSE_MINUTES: training minutes per diagnose variant (default 0.9); CELLS: where their runs go (default OUT.cells).
set -euo pipefail
STAGE=${1:?usage: runbook.sh prove|diagnose|speed|study|lease OUT}
OUT=${2:?usage: runbook.sh prove|diagnose|speed|study|lease OUT}
PY=${PYTHON:-python3}
TINY=${TINY:-0}
MIRROR=${MIRROR:-.gpu/mirror}
REFERENCE=${REFERENCE:-.gpu/sha-rnn}
CONFIG=${CONFIG:-configs/gpu-wikitext2.toml}
RESULTS=${RESULTS:-results/gpu-wikitext2}
# RECORDS: the committed records of the study's runs finished on earlier leases (bench.study.matrix.records); the matrix
# skips them (default results/reference/<results folder's name>/runs, where it exists).
export PYTHONUNBUFFERED=1
eval_args=()
mkdir -p "$OUT"
bench() { "$PY" cli.py "$@"; }

prove() {
  {
    echo "# prove: $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo '```'
    if command -v nvidia-smi >/dev/null; then nvidia-smi 2>&1 || true; else echo "nvidia-smi: not installed"; fi
    "$PY" scripts/gpu/versions.py
    echo '```'
  } > "$OUT/prove.md"
  # The CUDA tests, then the rest of the suite with CUDA visible (8 processes where pytest-xdist is installed).
  local parallel=()
  "$PY" -c "import xdist" 2>/dev/null && [ "$TINY" != 1 ] && parallel=(-n 8)
  pytest_part cuda tests/test_cuda.py
  [ "$TINY" = 1 ] || pytest_part suite tests --ignore=tests/test_cuda.py
  cat "$OUT/prove.md"
}

pytest_part() {
  local name=$1; shift
  echo "## pytest $*" >> "$OUT/prove.md"
  set +e
  timeout "${PYTEST_SECONDS:-270}" "$PY" -m pytest -q -p no:cacheprovider -rfEx "${parallel[@]}" "$@" \
    > "$OUT/pytest-$name.log" 2>&1
  echo "exit status $?" >> "$OUT/pytest-$name.log"
  set -e
  { echo "\`\`\`"
    grep -E "^(FAILED|ERROR|XFAIL|XPASS)|passed|failed|skipped|exit status" "$OUT/pytest-$name.log" | tail -40
    echo '```'; } >> "$OUT/prove.md"
}

# bench speed of every variant x model, one process each; a variant that cannot run here (CUDA graphs on a CPU), fails
# or would start after SPEED_SECONDS is a line in the table's notes, not the end of the stage.
speed() {
  local rows="$OUT/speed.jsonl" notes="$OUT/speed.notes" preset=paper steps=20 sweep=16,32,64 small=(small)
  local models=(sha-rnn lstm transformer) cuda
  speed_args=()
  if [ "$TINY" = 1 ]; then
    preset=tiny; steps=2; sweep=4,8; small=(); speed_args=(--set threads=1); tiny_eval  # a dry run beside other CPU work
  fi
  cuda=$("$PY" -c "import torch; print(int(torch.cuda.is_available()))")
  : > "$rows"; : > "$notes"
  for model in "${models[@]}"; do  # precision: float16 with a loss scaler, bf16 with float32 LSTMs, float32 (TF32)
    for precision in float32 bfloat16 float16; do
      measure --model "$model" --preset "$preset" --set precision="$precision"
    done
  done
  for model in "${models[@]}"; do  # one graph per step: fixed segments, no loss scaler
    if needs_cuda "$cuda" "cuda_graphs=true ($model)"; then
      measure --model "$model" --preset "$preset" --set precision=bfloat16 --set seq_jitter=false --set cuda_graphs=true
    fi
  done
  for impl in loop foreach; do  # LAMB's Python loop over the parameters against one launch per operation
    measure --model sha-rnn --preset "$preset" --set precision=bfloat16 --set lamb_impl="$impl"
  done
  side_by_side "$OUT/reference.json"
  if [ "$TINY" = 1 ]; then  # compilation on a CPU takes a minute: not in the dry run
    echo "compile=true: not measured in the dry run (compiling takes a minute on a CPU)" | tee -a "$notes"
  else
    for model in sha-rnn transformer; do  # its compilation time shows apart (compile_seconds)
      measure --model "$model" --preset "$preset" --set precision=bfloat16 --set compile=true
    done
  fi
  for model in "${models[@]}"; do
    for size in "${small[@]}"; do measure --model "$model" --preset "$size"; done
  done
  # batch sweeps (one bench speed --batch-sizes each): the SHA-RNN in float16, the Transformer compiled in bf16
  measure --model sha-rnn --preset "$preset" --set precision=float16 --batch-sizes "$sweep"
  if [ "$TINY" = 1 ]; then
    measure --model transformer --preset "$preset" --set precision=bfloat16 --batch-sizes "$sweep"
  else  # three compilations
    MEASURE_SECONDS=200 measure --model transformer --preset "$preset" --set precision=bfloat16 --set compile=true \
      --batch-sizes "$sweep"
  fi
  local table_args=("$rows" --notes "$notes")
  [ -f "$OUT/reference.json" ] && table_args+=(--reference "$OUT/reference.json")
  "$PY" scripts/gpu/speed_table.py "${table_args[@]}" > "$OUT/speed.md"
  rm -f "$notes"
  cat "$OUT/speed.md"
}

side_by_side() {  # the reference SHA-RNN against ours (reference_speed.py) into $1; a failure is a line in $notes
  local sizes=()
  [ "$TINY" = 1 ] && sizes=(--batch-size 2 --bptt 32 --emsize 64 --nhid 256 --max-memory 100 --steps 2 --rounds 2)
  if [ -f "$REFERENCE/model.py" ]; then
    timeout "${MEASURE_SECONDS:-120}" "$PY" scripts/gpu/reference_speed.py --reference "$REFERENCE" --out "$1" \
      "${sizes[@]}" || echo "failed: the reference side by side" | tee -a "$notes"
  else
    echo "no $REFERENCE/model.py: the side-by-side with the reference is skipped (see scripts/gpu/README.md)"
  fi
}

pack() {  # what comes back of a study: its results without checkpoints or per-token losses, and its report
  # (a finished run needs neither to be skipped when the matrix resumes; the report, made here, has read the losses)
  [ -d "$1" ] && tar --exclude='*.pt' --exclude='*.pt.*' --exclude='*.npy' -czf "$OUT/results.tgz" "$1"
  [ -d "reports/$(basename "$1")" ] && tar -czf "$OUT/report.tgz" "reports/$(basename "$1")"
  return 0
}

tiny_eval() {  # the dry run times evaluation at 16 and 32 streams: 256 streams' would double its time
  eval_args=(--eval-streams 16,32)
}

measure() {  # bench speed "$@" (with $eval_args unless it is a batch sweep), its JSON appended to $rows
  if (( SECONDS > ${SPEED_SECONDS:-400} )); then
    echo "not measured, the stage's ${SPEED_SECONDS:-400} s were spent: $*" | tee -a "$notes"
    return 0
  fi
  local row="$OUT/speed.row" extra=("${speed_args[@]}")
  [[ " $* " == *" --batch-sizes "* ]] || extra+=("${eval_args[@]}")
  if timeout "${MEASURE_SECONDS:-120}" "$PY" cli.py speed --vocab-size 256 --steps "$steps" --json "$@" \
      "${extra[@]}" > "$row"; then
    cat "$row" >> "$rows"
  else
    echo "failed: bench speed $* (its error above)" | tee -a "$notes"
  fi
  rm -f "$row"
}

compiled() {  # measure MODEL compiled; in the dry run a note instead (compiling takes a minute on a CPU)
  local model=$1; shift
  if [ "$TINY" = 1 ]; then
    echo "compile=true ($model): not measured in the dry run (compiling takes a minute on a CPU)" >> "$notes"
  else
    measure --model "$model" --preset "$preset" "$@" --set compile=true
  fi
}

needs_cuda() {  # true on a CUDA machine; elsewhere a note that the variant was skipped
  [ "$1" = 1 ] && return 0
  echo "$2: skipped, it needs a CUDA device and this machine has none" | tee -a "$notes"
  return 1
}

fetch_wikitext2() {
  if [ ! -f "${BENCH_DATA_DIR:-data}/wikitext-2/wiki.test.tokens" ]; then
    local fetch=(--mirror "$MIRROR")
    if [ ! -f "$MIRROR/wikitext-2/wiki.train.tokens" ]; then
      fetch+=(--file "train=$MIRROR/wikitext-2/wiki.train.first565.tokens" --allow-unverified)
    fi
    bench data fetch wikitext-2 "${fetch[@]}"
  fi
}

# Each variant of experiments/sharnn_plateau.py for about a minute; the table of what each did comes back.
diagnose() {
  fetch_wikitext2
  local cells=${CELLS:-$OUT.cells} budget=(--minutes "${DIAGNOSE_MINUTES:-0.9}")
  local variants=(float32 bf16-fp32-lstm float16-scaled gpu-as-before as-before-sdpa)
  [ "$TINY" = 1 ] && budget=(--steps 10 --tiny)
  : > "$OUT/diagnose.log"
  for variant in "${variants[@]}"; do
    echo "== $variant" >> "$OUT/diagnose.log"
    "$PY" experiments/sharnn_plateau.py --out "$cells" run "$variant" "${budget[@]}" >> "$OUT/diagnose.log" 2>&1 \
      || echo "$variant: failed (see diagnose.log)" | tee -a "$OUT/diagnose.log"
  done
  "$PY" experiments/sharnn_plateau.py --out "$cells" table > "$OUT/diagnose.md"
  cat "$OUT/diagnose.md"
}

records_of() {  # --records for the results folder $1, where its committed records are
  local records=${RECORDS:-results/reference/$(basename "$1")/runs}
  [ -d "$records" ] && echo "--records $records"
  return 0
}

study() {
  fetch_wikitext2
  local config="$CONFIG" records
  records=$(records_of "$RESULTS")
  if [ "$TINY" = 1 ]; then  # the plan only: the CPU cannot train these sizes in a test
    bench run-matrix "$config" --results "$RESULTS" $records --dry-run | tee "$OUT/study.log"
    return
  fi
  set +e
  timeout --signal=TERM --kill-after=60 "${STUDY_SECONDS:-480}" \
    "$PY" cli.py run-matrix "$config" --results "$RESULTS" $records --jobs "${JOBS:-6}" --quiet 2>&1 \
    | tee "$OUT/study.log"
  set -e
  bench report "$RESULTS" --out "reports/$(basename "$RESULTS")" 2>&1 | tee -a "$OUT/study.log" || true
  pack "$RESULTS"
  ls -la "$OUT"
}

# One call that ends by DEADLINE seconds (default 560): the study of LEASE_CONFIG (default configs/gpu-wikitext2.toml,
# whose grid lists its runs most wanted first; JOBS at a time, default 6) until STUDY_MARGIN seconds (default 45)
# before the deadline, the finished runs' records (losses by document, bench.study.matrix.records), then what comes back:
# records.tgz (each run folder without checkpoints or per-token losses: enough for the matrix to skip it and for
# the report) and the test split's per-token losses as nll.tgz.* (15 MB parts). The report is built where the
# records land (its compressor baselines take minutes of CPU). Time left once the study has nothing more to run
# goes to speed rows alone on the GPU, most wanted first, none started in the deadline's last 60 s.
lease() {
  local deadline=${DEADLINE:-560} logs="$OUT/logs" rows="$OUT/speed.jsonl" notes="$OUT/logs/speed.notes"
  local config=${LEASE_CONFIG:-configs/gpu-wikitext2.toml} results=${LEASE_RESULTS:-results/gpu-wikitext2}
  local preset=paper steps=20 study=(--jobs "${JOBS:-6}" --quiet)
  speed_args=()
  if [ "$TINY" = 1 ]; then
    preset=tiny; steps=2; study=(--jobs 1 --quiet); speed_args=(--set threads=1); tiny_eval
    config=${LEASE_CONFIG:-configs/smoke.toml}  # the GPU study's sizes take hours on a CPU
  fi
  mkdir -p "$logs"; : > "$rows"
  fetch_wikitext2 > "$logs/fetch.log" 2>&1
  timeout --signal=TERM --kill-after=20 $(( deadline - SECONDS - ${STUDY_MARGIN:-45} )) \
    "$PY" cli.py run-matrix "$config" --results "$results" $(records_of "$results") "${study[@]}" \
    > "$OUT/study.log" 2>&1 \
    || echo "the study stopped early (see study.log); the next call resumes it"
  echo "[$SECONDS s] study block done"; tail -4 "$OUT/study.log"
  if [ -d "$results" ]; then
    bench records documents "$results" > "$logs/records.log" 2>&1 || echo "records failed (see logs/records.log)"
    tar --exclude='*.pt' --exclude='*.pt.*' --exclude='*.npy' -czf "$OUT/records.tgz" "$results"
    find "$results" -name 'token_nll.test.npy' -print0 | tar --null -T - -czf - | split -b 15M - "$OUT/nll.tgz."
  fi
  SPEED_SECONDS=$(( deadline - 60 )) MEASURE_SECONDS=${MEASURE_SECONDS:-60}
  # the speed levers, most wanted first: the captured float16 step's CUDA test (runs refuse float16 graphs until it
  # passes), each model's training with evaluation at 16 and 256 streams, the reference side by side, the SHA-RNN's
  # layers overlapped, the step's profile, the Transformer's batch sweep compiled, then the compiled SHA-RNN
  if (( SECONDS < deadline - 90 )); then
    timeout 80 "$PY" -m pytest -q -p no:cacheprovider -rfEsx tests/test_cuda.py -k float16 > "$logs/float16-graphs.log" 2>&1 || true
    if tail -1 "$logs/float16-graphs.log" | grep -qE '^[0-9]+ passed in'; then  # every one passed, none skipped
      echo "the captured float16 step's CUDA test: passed (tests/test_cuda.py -k float16)" >> "$notes"
    else
      echo "the captured float16 step's CUDA test: failed or skipped (logs/float16-graphs.log)" >> "$notes"
    fi
  fi
  measure --model sha-rnn --preset "$preset" --set precision=float16
  (( SECONDS < deadline - 100 )) && MEASURE_SECONDS=90 side_by_side "$logs/reference.json" > "$logs/reference.log" 2>&1
  measure --model lstm --preset "$preset" --set precision=float16
  measure --model transformer --preset "$preset" --set precision=bfloat16
  for chunks in 2 4 8; do
    measure --model sha-rnn --preset "$preset" --set precision=float16 --set layer_overlap=$chunks --eval-streams 16
  done
  measure --model sha-rnn --preset "$preset" --set precision=float16 --profile --eval-streams 16
  local sweep=(--model transformer --preset "$preset" --set precision=bfloat16 --batch-sizes 16,32,64)
  [ "$TINY" = 1 ] || sweep+=(--set compile=true)  # three compilations: up to 150 s, never past the deadline
  local left=$(( deadline - SECONDS ))
  (( left > 60 )) && MEASURE_SECONDS=$(( left < 150 ? left : 150 )) measure "${sweep[@]}"
  compiled sha-rnn --set precision=float16
  if [ -s "$rows" ]; then
    local table_args=("$rows"); [ -f "$notes" ] && table_args+=(--notes "$notes")
    [ -f "$logs/reference.json" ] && table_args+=(--reference "$logs/reference.json")
    "$PY" scripts/gpu/speed_table.py "${table_args[@]}" > "$OUT/speed.md"; cat "$OUT/speed.md"
  else
    rm -f "$rows"
  fi
  tar -czf "$OUT/logs.tgz" -C "$OUT" logs && rm -r "$logs"
  echo "[$SECONDS s] lease done"
}

case "$STAGE" in
  prove) prove ;;
  diagnose) diagnose ;;
  speed) speed ;;
  study) study ;;
  lease) lease ;;
  *) echo "error: unknown stage $STAGE; stages: prove, diagnose, speed, study, lease" >&2; exit 2 ;;
esac
