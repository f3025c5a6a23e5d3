#!/usr/bin/env bash
# Validate the 100 KernelBench level-2 problems at their real sizes on CUDA; outputs go to $OUT.
# Usage (repository root, on the GPU machine):  OUT=/some/dir bash scripts/device_validate_kb.sh [problems.jsonl]
set -euo pipefail
OUT="${OUT:-out}"
mkdir -p "$OUT"
KB="${1:-}"
for candidate in "$KB" shared/kernelbench/problems.jsonl ../shared/kernelbench/problems.jsonl /work/shared/kernelbench/problems.jsonl; do
  if [ -n "$candidate" ] && [ -f "$candidate" ]; then KB="$candidate"; break; fi
done
[ -f "$KB" ] || { echo "KernelBench problems.jsonl not found; pass its path" >&2; exit 2; }
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
"$PY" - "$KB" "$OUT/kb_level2.jsonl" <<'PYEOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
with open(sys.argv[2], "w") as out:
    for r in rows:
        if r["level"] == 2:
            out.write(json.dumps({"id": f"kb-2-{r['problem_id']}", "source": r["name"], "code": r["code"]}) + "\n")
PYEOF
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1 || true
"$PY" -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))" > "$OUT/versions.txt"
start=$(date +%s)
"$PY" -m opgen validate --input "$OUT/kb_level2.jsonl" --out "$OUT/kb_level2_verdicts.jsonl" --device cuda \
  --workers "${WORKERS:-1}" --timeout "${TIMEOUT:-180}" --memory-mb "${MEMORY_MB:-32000}" \
  --funnel "$OUT/kb_level2_funnel.json" --no-progress 2> >(tee "$OUT/validate.log" >&2)
echo "wall seconds: $(( $(date +%s) - start ))" | tee -a "$OUT/validate.log"
"$PY" - "$OUT/kb_level2_verdicts.jsonl" <<'PYEOF' | tee "$OUT/summary.txt"
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
kept = [l for l in lines if l["keep"]]
print(f"kept {len(kept)} of {len(lines)}")
for l in lines:
    if not l["keep"]:
        print("rejected", l["source"], l["reason"], (l.get("detail") or "")[:160].replace("\n", " "))
ms = [l["eager_ms_cuda"] for l in lines if "eager_ms_cuda" in l]
if ms:
    print(f"eager_ms_cuda median {statistics.median(ms):.3f}, in 1-100 ms: {sum(1 <= m <= 100 for m in ms)} of {len(ms)}")
cs = [l["compile_s"] for l in lines if "compile_s" in l]
if cs:
    print(f"compile_s median {statistics.median(cs):.2f}")
PYEOF
