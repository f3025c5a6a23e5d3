#!/usr/bin/env bash
# The reduced-precision figures on a GPU machine, one step a call (the builds themselves: scripts/gpu/dataset.sh
# with DTYPE, NAME and N). Run from the repository root, carrying .devdata .whl and the run folders a step reads:
#   OUT=$OUT STEP=probe bash scripts/gpu/precisions.sh              # which operators lack a bf16/fp16 kernel
#   OUT=$OUT STEP=twins RUN=data/bf16-run bash scripts/gpu/precisions.sh
#       # the run's tasks rendered in fp32 from their own graphs, timed: the speed-ups of the precision over fp32
#   OUT=$OUT STEP=check RUN=data/bf16-run FP32_RUN=data/fp32-run CONFIG=bf16 bash scripts/gpu/precisions.sh
#       # both published as one folder, every row of CONFIG checked again in fresh processes at its tolerance
# DEVICE=cpu runs the same steps on a machine without a GPU (the figures then mean nothing).
set -u
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore HF_HUB_OFFLINE=1
OUT=${OUT:-/tmp/opgen-device}; STEP=${STEP:-probe}; DEVICE=${DEVICE:-cuda}; CONFIG=${CONFIG:-bf16}
mkdir -p "$OUT"
source scripts/gpu/env.sh
case "$STEP" in
  probe)
    python3 -m opgen vocab --probe-dtypes bf16 fp16 --device "$DEVICE" --out "$OUT/dtype_support.json" 2>&1 | tail -n 4
    ;;
  twins)
    python3 scripts/analysis/precision_twins.py twins "$RUN/tasks.parquet" --dtype fp32 --out "$OUT/twins.jsonl" &&
    python3 -m opgen time --input "$OUT/twins.jsonl" --out "$OUT/twins_timed.jsonl" --device "$DEVICE" \
      > "$OUT/time.log" 2>&1; tail -n 3 "$OUT/time.log"
    python3 scripts/analysis/precision_twins.py speedups "$RUN/tasks.parquet" "$OUT/twins_timed.jsonl" \
      | tee "$OUT/speedups.json"
    ;;
  check)
    rm -rf /tmp/opgen-precisions
    python3 -m opgen publish "$FP32_RUN" "$RUN" --repo-id opgen/precisions --dry-run --out /tmp/opgen-precisions \
      > "$OUT/publish.log" 2>&1 || { tail -n 5 "$OUT/publish.log"; exit 1; }
    python3 -m opgen check /tmp/opgen-precisions --config "$CONFIG" --sample 0 --device "$DEVICE" --no-progress \
      --report "$OUT/check.json" 2>&1 | tail -n 12
    ;;
  *) echo "STEP must be probe, twins or check, not $STEP"; exit 2 ;;
esac
