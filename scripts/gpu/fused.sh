#!/usr/bin/env bash
# The fused comparisons of the execute checks (filters/execute/fused.py) on a CUDA machine, from the repository root,
# with nothing else on the GPU (after a build's MODE=stop), in about 5 minutes:
#   1. their exactness test, `pytest -m gpu tests/test_fused_gpu.py`;
#   2. a replay of SAMPLE of the build's executed candidates with them on (record_verdicts.py replay: every verdict
#      the same, exit 0);
#   3. the checks' holds of the GPU's lock and their device seconds with one worker alone, without them and then
#      with them (phases.py --workers 1 --device-time, CANDIDATES candidates, TASKS timed again).
# BUILD: the build's run folder here, else its committed state. Figures into $OUT/fused.txt.
#   OUT=$OUT [BUILD=data/opgen-ops-6k-run] [SAMPLE=60] [CANDIDATES=20] [TASKS=4] bash scripts/gpu/fused.sh
set -u
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore HF_HUB_OFFLINE=1
OUT=${OUT:-/tmp/opgen-fused}; SAMPLE=${SAMPLE:-60}; CANDIDATES=${CANDIDATES:-20}; TASKS=${TASKS:-4}
BUILD=${BUILD:-data/opgen-ops-6k-run}
[ -f "$BUILD/config.json" ] || BUILD=builds/opgen-ops-6k/opgen-ops-6k.state
mkdir -p "$OUT"
source scripts/gpu/env.sh
machine_facts "$OUT/machine.txt" > /dev/null
say() { echo "$@" | tee -a "$OUT/fused.txt"; }
# (the machine's copy of the repository may not be at the working tree's commit: say which one was carried)
say "fused comparisons on $(head -2 "$OUT/machine.txt" | tail -1), build $BUILD"
python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_fused_gpu.py 2>&1 | tail -3 | tee -a "$OUT/fused.txt"
OPGEN_FUSED_COMPARISONS=1 python3 scripts/analysis/record_verdicts.py replay "$BUILD" --sample "$SAMPLE" \
  --workers 10 > "$OUT/replay.txt" 2>&1
say "replay with the fused comparisons: rc=$?"; tail -n 12 "$OUT/replay.txt" | tee -a "$OUT/fused.txt"
for fused in 0 1; do
  say "phases, OPGEN_FUSED_COMPARISONS=$fused:"
  OPGEN_FUSED_COMPARISONS=$fused python3 scripts/analysis/phases.py "$BUILD" --workers 1 --candidates "$CANDIDATES" \
    --tasks "$TASKS" --device-time 2>&1 | tail -n 8 | tee -a "$OUT/fused.txt"
done
