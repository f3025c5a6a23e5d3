#!/usr/bin/env bash
# One call of a long dataset build on a GPU machine that may be fresh and may be stopped at any moment: restore
# the state carried from the last call, build until BUILD_S seconds, and leave the state in $OUT for the next call;
# once the build is complete, publish it into $OUT/$NAME. Run from the repository root:
#   OUT=$OUT N=6000 NAME=opgen-ops-6k BUILD_S=540 bash scripts/gpu/dataset.sh      # carry .devdata .whl .devstate
# Between calls, on the machine that holds the repository: cp FILES_AT/$NAME.state* .devstate/  (the state is one
# file, with FILE.*.N parts past 16 MiB). The build command is the README's, with no tuning flags.
set -u
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore HF_HUB_OFFLINE=1
OUT=${OUT:-/tmp/opgen-device}; N=${N:-6000}; SEED=${SEED:-0}; NAME=${NAME:-opgen-ops-6k}; BUILD_S=${BUILD_S:-540}
RUN=data/$NAME-run
mkdir -p "$OUT"
source scripts/gpu/env.sh
machine_facts "$OUT/machine.txt" > /dev/null
RESUME=()
[ -f ".devstate/$NAME.state" ] && RESUME=(--resume-from ".devstate/$NAME.state")
timeout -s TERM "$BUILD_S" python3 -m opgen build --n "$N" --seed "$SEED" --out "$RUN" --device cuda --profile gpu \
    --reference .devdata/problems.jsonl --no-progress --save-state "$OUT/$NAME.state" "${RESUME[@]}" \
    > "$OUT/build.log" 2>&1
status=$?
tail -n 30 "$OUT/build.log"
cp "$RUN/logs/build.log" "$OUT/run.log" 2>/dev/null
if [ "$status" -eq 0 ] && [ -f "$RUN/tasks.parquet" ]; then
  python3 -m opgen publish "$RUN" --repo-id "opgen/$NAME" --dry-run --out "$OUT/$NAME" > "$OUT/publish.log" 2>&1
  tail -n 5 "$OUT/publish.log"
  cp "$RUN/stats.json" "$OUT/"
fi
echo "build exit $status; state: $(ls -l "$OUT/$NAME".state* 2>/dev/null | awk '{s += $5} END {print s}') bytes"
