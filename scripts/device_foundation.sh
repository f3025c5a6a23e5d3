#!/usr/bin/env bash
# On the GPU machine, one call: (1) eager CUDA time of 200 gpu-profile candidates vs the sampler's
# estimate (calibration, issue 2); (2) `opgen validate --device cuda` over the 100 KernelBench level-2
# problems at real size (issue 3). Inputs in .devdata/ (git-ignored, carried): gpu200.jsonl from
# `opgen sample --n 200 --seed 2026 --profile gpu`, problems.jsonl (the offline KernelBench copy).
# Wheels in .whl/ (carried) bring datasketch/datasets/transformers 5.24 where the image lacks them.
set -u
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
OUT=${OUT:-/tmp/opgen-device}
mkdir -p "$OUT"
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, transformers; print(torch.__version__, torch.version.cuda, transformers.__version__)" | tee -a "$OUT/gpu.txt"
echo "== calibration (t=${SECONDS}s)"
timeout "${CALIBRATE_S:-240}" python3 scripts/device_calibrate.py .devdata/gpu200.jsonl "$OUT/calibration.jsonl" \
  > "$OUT/calibration.log" 2>&1
tail -n 4 "$OUT/calibration.log"
echo "== validate KernelBench level 2 on cuda (t=${SECONDS}s)"
python3 - <<'PY'
import json
rows = [json.loads(line) for line in open(".devdata/problems.jsonl")]
with open(".devdata/kb_level2_in.jsonl", "w") as out:
    for r in rows:
        if r["level"] == 2:
            out.write(json.dumps({"id": f"kb-2-{r['problem_id']}", "source": r["name"], "code": r["code"]}) + "\n")
PY
start=$SECONDS
timeout "${VALIDATE_S:-300}" python3 -m opgen validate --input .devdata/kb_level2_in.jsonl \
  --out "$OUT/kb_level2_verdicts.jsonl" --device cuda --workers "${WORKERS:-8}" --timeout 180 --memory-mb 32000 \
  --funnel "$OUT/kb_level2_funnel.json" --no-progress > "$OUT/validate.log" 2>&1
echo "validate rc=$? wall $((SECONDS - start))s" | tee -a "$OUT/validate.log"
tail -n 30 "$OUT/validate.log"
