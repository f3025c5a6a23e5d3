#!/usr/bin/env bash
# Here (not on the GPU machine): lay out what the device scripts carry, in git-ignored folders.
#   .whl/     wheels the GPU image lacks (datasketch, datasets + dill/multiprocess, transformers 5.24 to match
#             the vocabulary, pytest for scripts/gpu/grade.sh), installed there with --no-deps into /tmp/site by the
#             device scripts;
#   .devdata/ the offline KernelBench copy and its published timings (kb_timing/, for the `kb` step's report),
#             200 gpu-profile candidates for the `calibrate` step (scripts/gpu/calibrate.py), and
#             mixuniform.jsonl: the dedup survivors of gpu candidates 0-199 of seed 0 under --composition mix
#             and uniform, interleaved, each id prefixed by its composition (scripts/gpu/checks.sh mixuniform).
#   data/short-tasks.jsonl  60 tasks from the shortest quarter of the committed 6,000-task state's (a DATASET for
#             scripts/gpu/grade.sh's throughput runs: scripts/gpu/short_tasks.py).
# Then call the device tool with carry [".devdata", ".whl", "data/short-tasks.jsonl"] and e.g.
# `STEPS=build OUT=$OUT bash scripts/gpu/checks.sh`.
set -euo pipefail
cd "$(dirname "$0")/../.."
for path in /.whl/ /.devdata/; do grep -qx "$path" .git/info/exclude || echo "$path" >> .git/info/exclude; done
PY=${PY:-.venv/bin/python}
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
    transformers==5.24.0 datasketch==2.0.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 \
    pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 pygments==2.21.0 pytest-timeout==2.4.0
mkdir -p .devdata
cp "${KERNELBENCH:-../shared/kernelbench/problems.jsonl}" .devdata/problems.jsonl
KB_TIMING=$(dirname "${KERNELBENCH:-../shared/kernelbench/problems.jsonl}")/timing
[ -d "$KB_TIMING" ] && rm -rf .devdata/kb_timing && cp -r "$KB_TIMING" .devdata/kb_timing
"$PY" -m opgen sample --n 200 --seed 2026 --profile gpu --out .devdata/gpu200.jsonl --workers 2
for mode in mix uniform; do
  "$PY" -m opgen sample --n "${MIXUNIFORM_N:-200}" --seed 0 --profile gpu --composition "$mode" --workers 2 \
      --out ".devdata/$mode.jsonl"
  "$PY" -m opgen dedup --input ".devdata/$mode.jsonl" --out ".devdata/$mode.dedup.jsonl" --reference .devdata/problems.jsonl
done
"$PY" - <<'PY'
import json
kept = {}
for mode in ("mix", "uniform"):
    rows = [json.loads(line) for line in open(f".devdata/{mode}.jsonl")]
    verdicts = [json.loads(line) for line in open(f".devdata/{mode}.dedup.jsonl")]
    kept[mode] = [dict(r, id=f"{mode}-{r['id']}") for r, v in zip(rows, verdicts) if v["keep"]]
    print(mode, len(rows), "candidates,", len(kept[mode]), "kept by dedup")
with open(".devdata/mixuniform.jsonl", "w") as out:
    for i in range(max(map(len, kept.values()))):
        for mode in ("mix", "uniform"):
            if i < len(kept[mode]):
                out.write(json.dumps(kept[mode][i]) + "\n")
PY
preview=$(mktemp -d)
"$PY" scripts/analysis/state_preview.py builds/opgen-ops-6k/opgen-ops-6k.state --out "$preview" > /dev/null
"$PY" scripts/gpu/short_tasks.py "$preview/run/tasks.parquet" --out data/short-tasks.jsonl
rm -rf "$preview"
du -sh .whl .devdata
