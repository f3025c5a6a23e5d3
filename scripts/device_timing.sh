#!/usr/bin/env bash
# Baseline CUDA timings of the KernelBench level-2 problems on one GPU machine, in one call:
# a 3-task smoke run, two full runs of `opgen time` (run 1 cold inductor cache, run 2 warm), then a
# 1-worker vs default-workers comparison on a subset (cold caches, fewer trials), and the report.
# Input: .devdata/kb_level2.jsonl (copied from ../shared/kernelbench/problems.jsonl; git-ignored, carried).
# Usage there: OUT=/some/dir bash scripts/device_timing.sh   (stops starting steps after BUDGET_S seconds)
set -u
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/opgen-timing}
BUDGET_S=${BUDGET_S:-540}
SMOKE=${SMOKE:-1}
SUBSET=${SUBSET:-0}
IN=${IN:-.devdata/kb_level2.jsonl}
DEVICE=${DEVICE:-cuda}
TRIALS=${TRIALS:-100}
WARMUPS=${WARMUPS:-10}
mkdir -p "$OUT"
CACHE=$(mktemp -d)
LOGS=$(mktemp -d)  # at most 8 files come back from $OUT: logs are joined into $OUT/logs.txt at the end
OPGEN_TIME=(python3 -m opgen time)
if ! python3 -m opgen time --help > /dev/null 2> "$LOGS/cli.err"; then  # another command's imports failing
    echo "python3 -m opgen fails here ($(tail -1 "$LOGS/cli.err")); using scripts/bench_timing.py time"
    OPGEN_TIME=(python3 scripts/bench_timing.py time)
fi

step() {  # step NAME SECONDS ARGS...: run `opgen time` with a time limit, keep its log, print its summary
    local name=$1 limit=$2; shift 2
    local left=$((BUDGET_S - SECONDS))
    if (( left < 30 )); then echo "skip $name: budget spent"; return 1; fi
    (( limit > left )) && limit=$left
    echo "== $name (limit ${limit}s, t=${SECONDS}s)"
    timeout "$limit" "${OPGEN_TIME[@]}" --input "$IN" --device "$DEVICE" --trials "$TRIALS" --warmups "$WARMUPS" --no-progress "$@" 2> "$LOGS/$name.log"
    local rc=$?
    grep '^{"time"' "$LOGS/$name.log" || { echo "$name failed rc=$rc"; tail -c 3000 "$LOGS/$name.log"; }
    return $rc
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv
nproc
trap 'for f in "$LOGS"/*.log; do echo "### $f"; tail -c 100000 "$f"; done > "$OUT/logs.txt"' EXIT
if (( SMOKE )); then step smoke 150 --out "$LOGS/smoke.jsonl" --limit 3 --trials 10 --cache-dir "$CACHE/smoke" || exit 1; fi
step run1 ${RUN1_S:-260} --out "$OUT/timed1.jsonl" --cache-dir "$CACHE/shared"
python3 - "$OUT/timed1.jsonl" <<'EOF' || exit 1
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
failed = [r for r in rows if r.get("eager_ms") is None or r.get("compile_ms") is None]
for r in failed[:5]:
    print("failed:", r.get("name"), (r.get("timing_error") or "")[:400])
sys.exit(1 if len(failed) > 20 else 0)
EOF
# run 2 (the repeat) gets as many tasks as run 1's rate fits in what is left of the budget
RATE=$(grep -o '"tasks_per_min": [0-9.]*' "$LOGS/run1.log" | grep -o '[0-9.]*$')
N2=$(python3 -c "print(max(0, min(100, int(${RATE:-0} / 60 * ($BUDGET_S - $SECONDS - 25) * 0.8))))")
echo "run2 tasks: $N2"
(( N2 >= 10 )) && step run2 200 --out "$OUT/timed2.jsonl" --cache-dir "$CACHE/shared" --limit "$N2"
(( SUBSET > 0 )) && step seq 120 --out "$OUT/seq.jsonl" --limit "$SUBSET" --workers-per-gpu 1 --cache-dir "$CACHE/seq"
python3 scripts/bench_timing.py report --kb-timing .devdata/kb_timing $(ls "$OUT"/timed1.jsonl "$OUT"/timed2.jsonl 2>/dev/null) > "$OUT/report.json" 2>&1
python3 - "$OUT/report.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print(json.dumps({k: r[k] for k in ("runs", "method_agreement", "repeat_agreement_pct", "kernelbench_h100",
                                    "out_of_window", "hardware") if k in r}, indent=0)[:6000])
print("failed:", r.get("failed"))
EOF
