#!/usr/bin/env bash
# Device must-shows of issues 11 and 12 on one H200, in steps chosen by STEPS (space-separated):
#   smoke     an 8-task cuda build (stops everything if it fails)
#   kb        KernelBench level 2 timed twice with adaptive trials, and KB_FIXED problems with 100 fixed trials
#   build     `opgen build --n N` (new mode: streaming, adaptive, survival planning), resumable under BUILD_S;
#             then the independent agreement script over its first 100 tasks
#   kbdiag    KernelBench level 2 timed twice with one timing worker (--workers-per-gpu 1): does the compile
#             run-to-run spread come from the other workers sharing the CPU?
#   old       the same seed and N_OLD in the old mode (--no-stream --trial-mode fixed --planning rounds), and
#             the new mode on the same N_OLD, one after the other
# Inputs (git-ignored, carried): .whl/ and .devdata/ (scripts/device_prepare.sh); a carried data/device3/ resumes.
# Usage there: OUT=$OUT STEPS="smoke kb" bash scripts/device_session3.sh
set -u
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
OUT=${OUT:-/tmp/opgen-session3}; STEPS=${STEPS:-smoke}; N=${N:-300}; N_OLD=${N_OLD:-60}; KB_FIXED=${KB_FIXED:-40}
BUILD_S=${BUILD_S:-420}; KB_S=${KB_S:-200}; KB_FIXED_S=${KB_FIXED_S:-150}; WORK=data/device3
mkdir -p "$OUT" "$WORK"
LOGS=$(mktemp -d)
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/opgen-inductor}
trap 'for f in "$LOGS"/*; do echo "### $f"; tail -c 40000 "$f"; done > "$OUT/logs.txt"' EXIT
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv; nproc
  python3 -c "import torch, transformers, triton; print(torch.__version__, torch.version.cuda, triton.__version__, transformers.__version__)"
} | tee "$OUT/summary.txt"
KB=.devdata/problems.jsonl
BUILD_ARGS=(--device cuda --profile gpu --workers "${WORKERS:-8}" --timing-workers "${TIMING_WORKERS:-4}"
            --shard-size "${SHARD_SIZE:-16}" --memory-mb 14000 --timeout 300 --no-progress --reference "$KB")
say() { echo "$@" | tee -a "$OUT/summary.txt"; }
build() {  # build NAME N SECONDS EXTRA...: one build, its figures into the summary
  local name=$1 n=$2 seconds=$3; shift 3
  local start=$SECONDS
  timeout "$seconds" python3 -m opgen build --n "$n" --seed 0 --out "$WORK/$name" "${BUILD_ARGS[@]}" "$@" \
    > "$LOGS/$name.out" 2> "$LOGS/$name.err"
  say "build $name rc=$? wall $((SECONDS - start)) s"; tail -n 4 "$LOGS/$name.out" | tee -a "$OUT/summary.txt"
  [ -f "$WORK/$name/stats.json" ] && cp "$WORK/$name/stats.json" "$OUT/stats_$name.json"
}

for step in $STEPS; do
  say "== $step (t=${SECONDS}s)"
  case $step in
    smoke)
      build smoke 8 240 || true
      [ -f "$WORK/smoke/tasks.parquet" ] || { say "smoke failed"; exit 1; } ;;
    kb)
      python3 - <<'PY'
import json
with open(".devdata/kb_level2.jsonl", "w") as out:
    for line in open(".devdata/problems.jsonl"):
        r = json.loads(line)
        if r["level"] == 2:
            out.write(json.dumps({"id": f"kb-2-{r['problem_id']}", "source": r["name"], "code": r["code"]}) + "\n")
PY
      for run in 1 2; do
        start=$SECONDS
        timeout "$KB_S" python3 -m opgen time --input .devdata/kb_level2.jsonl --device cuda --out "$WORK/kb_adaptive$run.jsonl" \
          --no-progress 2> "$LOGS/kb$run.log"
        say "kb adaptive run $run rc=$? wall $((SECONDS - start)) s"; grep '^{"time"' "$LOGS/kb$run.log" | tee -a "$OUT/summary.txt"
      done
      start=$SECONDS
      timeout "$KB_FIXED_S" python3 -m opgen time --input .devdata/kb_level2.jsonl --device cuda --out "$WORK/kb_fixed.jsonl" \
        --trial-mode fixed --limit "$KB_FIXED" --no-progress 2> "$LOGS/kbfixed.log"
      say "kb fixed rc=$? wall $((SECONDS - start)) s"; grep '^{"time"' "$LOGS/kbfixed.log" | tee -a "$OUT/summary.txt"
      python3 scripts/compare_timings.py "$WORK"/kb_adaptive1.jsonl "$WORK"/kb_adaptive2.jsonl "$WORK"/kb_fixed.jsonl \
        | tee -a "$OUT/summary.txt"
      tar czf "$OUT/kb.tar.gz" -C "$WORK" kb_adaptive1.jsonl kb_adaptive2.jsonl kb_fixed.jsonl 2>/dev/null ;;
    kbdiag)
      [ -f .devdata/kb_level2.jsonl ] || python3 -c "
import json
with open('.devdata/kb_level2.jsonl', 'w') as out:
    for r in map(json.loads, open('.devdata/problems.jsonl')):
        if r['level'] == 2:
            out.write(json.dumps({'id': f\"kb-2-{r['problem_id']}\", 'source': r['name'], 'code': r['code']}) + '\n')
"
      for run in 1 2; do
        start=$SECONDS
        timeout "$KB_S" python3 -m opgen time --input .devdata/kb_level2.jsonl --device cuda --workers-per-gpu 1 \
          --out "$WORK/kb_w1_$run.jsonl" --no-progress 2> "$LOGS/kbw1_$run.log"
        say "kb one-worker run $run rc=$? wall $((SECONDS - start)) s"; grep '^{"time"' "$LOGS/kbw1_$run.log" | tee -a "$OUT/summary.txt"
      done
      python3 scripts/compare_timings.py "$WORK"/kb_w1_1.jsonl "$WORK"/kb_w1_2.jsonl | tee -a "$OUT/summary.txt"
      tar czf "$OUT/kbdiag.tar.gz" -C "$WORK" kb_w1_1.jsonl kb_w1_2.jsonl 2>/dev/null ;;
    build)
      build "gpu$N" "$N" "$BUILD_S"
      if [ -f "$WORK/gpu$N/tasks.parquet" ]; then
        timeout 120 python3 scripts/agreement.py "$WORK/gpu$N/tasks.parquet" "$OUT/agreement.json" --limit 100 \
          --budget-s 100 | tee -a "$OUT/summary.txt"
        python3 -m opgen publish "$WORK/gpu$N" --repo-id opgen/cuda-ops-h200 --dry-run --out "$WORK/dataset$N" \
          >> "$OUT/summary.txt" 2>&1
      fi
      tar czf "$OUT/run$N.tar.gz" -C "$WORK" "gpu$N" 2>/dev/null
      [ -d "$WORK/dataset$N" ] && tar czf "$OUT/dataset$N.tar.gz" -C "$WORK" "dataset$N" ;;
    old)
      build "new$N_OLD" "$N_OLD" 200
      build "old$N_OLD" "$N_OLD" 330 --no-stream --trial-mode fixed --planning rounds
      tar czf "$OUT/oldnew.tar.gz" -C "$WORK" "new$N_OLD" "old$N_OLD" 2>/dev/null ;;
  esac
done
say "done (t=${SECONDS}s)"
