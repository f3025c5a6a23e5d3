#!/usr/bin/env bash
# One call on a GPU machine (1 or 2 GPUs) that checks timing, validation and the gpu profile together:
#   1. `opgen time` over the 100 KernelBench level-2 problems on every visible GPU, 100 trials, cold cache;
#   2. `opgen validate --device cuda` over the same problems at real size, workers spread over the GPUs;
#   3. eager time of 200 gpu-profile candidates against the sampler's estimate (one process per GPU);
#   4. `opgen time` again on GPU 0 alone (8 workers, as on a 16-core 1-GPU box) for what the budget leaves:
#      the repeat of run 1, and the one-GPU throughput.
# Inputs (git-ignored, carried): .devdata/{kb_level2,gpu200,problems}.jsonl and .whl/ (see device_prepare.sh).
# Usage there: OUT=/some/dir BUDGET_S=570 bash scripts/device_verify.sh
set -u
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
OUT=${OUT:-/tmp/opgen-verify}
BUDGET_S=${BUDGET_S:-570}
mkdir -p "$OUT"
LOGS=$(mktemp -d)   # at most 8 files come back: logs are joined into $OUT/logs.txt at the end
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$(mktemp -d)}   # one cache for every step
trap 'for f in "$LOGS"/*; do echo "### $f"; tail -c 60000 "$f"; done > "$OUT/logs.txt"' EXIT
source scripts/device_env.sh
machine_facts "$OUT/machine.txt"
GPUS=$(nvidia-smi -L | wc -l)

limit() {  # limit SECONDS: the smaller of SECONDS and what is left of the budget
  local left=$((BUDGET_S - SECONDS)); (( $1 < left )) && echo "$1" || echo "$left"
}

echo "== 1. time KernelBench level 2 on $GPUS GPU(s), cold cache (t=${SECONDS}s)"
start=$SECONDS
timeout "$(limit "${RUN1_S:-220}")" python3 -m opgen time --input .devdata/kb_level2.jsonl --device cuda \
  --out "$OUT/timed1.jsonl" --no-progress 2> "$LOGS/run1.log"
echo "run1 rc=$? wall $((SECONDS - start)) s"; grep '^{"time"' "$LOGS/run1.log"

echo "== 2. validate KernelBench level 2 on cuda (t=${SECONDS}s)"
python3 - <<'PY'
import json
with open(".devdata/kb_level2_in.jsonl", "w") as out:
    for line in open(".devdata/problems.jsonl"):
        r = json.loads(line)
        if r["level"] == 2:
            out.write(json.dumps({"id": f"kb-2-{r['problem_id']}", "source": r["name"], "code": r["code"]}) + "\n")
PY
start=$SECONDS
timeout "$(limit "${VALIDATE_S:-180}")" python3 -m opgen validate --input .devdata/kb_level2_in.jsonl \
  --out "$OUT/kb_level2_verdicts.jsonl" --device cuda --workers "${VALIDATE_WORKERS:-$((8 * GPUS))}" --timeout 180 \
  --memory-mb 16000 --funnel "$OUT/kb_level2_funnel.json" --no-progress > "$LOGS/validate.log" 2>&1
echo "validate rc=$? wall $((SECONDS - start)) s"; tail -n 25 "$LOGS/validate.log"

echo "== 3. gpu-profile calibration, 200 candidates (t=${SECONDS}s)"
start=$SECONDS
calibrate_s=$(limit "${CALIBRATE_S:-100}")
for ((g = 0; g < GPUS; g++)); do
  CUDA_VISIBLE_DEVICES=$g timeout "$calibrate_s" python3 scripts/device_calibrate.py .devdata/gpu200.jsonl \
    "$LOGS/calibration$g.jsonl" "$g/$GPUS" 2> "$LOGS/calibration$g.err" &
done
wait
cat "$LOGS"/calibration*.jsonl > "$OUT/calibration.jsonl"
echo "calibration wall $((SECONDS - start)) s"
python3 scripts/device_calibrate.py --summary "$OUT/calibration.jsonl" | head -n 40

echo "== 4. time again on GPU 0 alone, 8 workers, warm cache (t=${SECONDS}s)"
RATE=$(grep -o '"tasks_per_min": [0-9.]*' "$LOGS/run1.log" | grep -o '[0-9.]*$')
N2=$(python3 -c "print(max(0, min(100, int(${RATE:-0} / 60 / $GPUS * ($BUDGET_S - $SECONDS - 30) * 0.85))))")
echo "run2 tasks: $N2"
if (( N2 >= 10 )); then
  start=$SECONDS
  CUDA_VISIBLE_DEVICES=0 timeout "$(limit 400)" python3 -m opgen time --input .devdata/kb_level2.jsonl --device cuda \
    --out "$OUT/timed2.jsonl" --limit "$N2" --workers-per-gpu 8 --no-progress 2> "$LOGS/run2.log"
  echo "run2 rc=$? wall $((SECONDS - start)) s"; grep '^{"time"' "$LOGS/run2.log"
fi
python3 scripts/bench_timing.py report --kb-timing .devdata/kb_timing $(ls "$OUT"/timed[12].jsonl 2>/dev/null) \
  > "$OUT/report.json" 2>&1
python3 - "$OUT/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(json.dumps({k: r[k] for k in ("runs", "method_agreement", "repeat_agreement_pct", "out_of_window") if k in r})[:5000])
PY
echo "done t=${SECONDS}s"
