#!/usr/bin/env bash
# Device build: N (default 100) gpu-profile tasks validated and timed on CUDA; the run summary goes to $OUT.
# Usage (repo root, on a CUDA machine): OUT=/some/folder bash scripts/device_build.sh
# A run folder carried back (RUN, default data/gpu-N) is resumed: BUILD_S splits a long build over calls.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"
N="${N:-100}"
SEED="${SEED:-0}"
RUN="${RUN:-data/gpu-$N}"
OUT="${OUT:-/tmp/opgen-device-out}"
PY="${PYTHON:-python3}"
BUILD_S="${BUILD_S:-0}"   # stop the build after this many seconds (0: no limit); a rerun resumes it
GPUS=$(nvidia-smi -L 2>/dev/null | wc -l)
WORKERS="${WORKERS:-$((8 * (GPUS > 0 ? GPUS : 1)))}"   # validation workers, spread over the GPUs
SHARD_SIZE="${SHARD_SIZE:-32}"
KB="${OPGEN_KERNELBENCH:-}"
for candidate in shared/kernelbench/problems.jsonl ../shared/kernelbench/problems.jsonl .devdata/problems.jsonl; do
    if [ -z "$KB" ] && [ -f "$candidate" ]; then KB="$candidate"; fi
done
mkdir -p "$OUT"
source scripts/device_env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.csv" 2>&1 || true
start=$(date +%s)
set +e
timeout_cmd=()
if [ "$BUILD_S" != 0 ]; then timeout_cmd=(timeout "$BUILD_S"); fi
"${timeout_cmd[@]}" "$PY" -m opgen build --n "$N" --seed "$SEED" --out "$RUN" --device cuda --profile gpu --workers "$WORKERS" --shard-size "$SHARD_SIZE" --memory-mb "${MEMORY_MB:-14000}" --timeout "${TIMEOUT:-300}" \
    --no-progress ${KB:+--reference "$KB"} > "$OUT/build.out" 2> "$OUT/build.err"
status=$?
set -e
echo "build exit $status after $(( $(date +%s) - start )) s" | tee "$OUT/summary.txt"
cat "$OUT/build.out" >> "$OUT/summary.txt"
tail -n 20 "$OUT/build.err" >> "$OUT/summary.txt"
for file in config.json stats.json rejected.jsonl; do
    if [ -f "$RUN/$file" ]; then cp "$RUN/$file" "$OUT/"; fi
done
tar czf "$OUT/run.tar.gz" -C "$(dirname "$RUN")" "$(basename "$RUN")" 2>/dev/null || true
if [ "$status" -eq 0 ]; then
    "$PY" -m opgen publish "$RUN" --repo-id opgen/cuda-ops-gpu --dry-run --out "$OUT/dataset" >> "$OUT/summary.txt"
fi
cat "$OUT/summary.txt"
exit "$status"
