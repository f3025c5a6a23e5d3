#!/usr/bin/env bash
# Here (not on the GPU machine): lay out what the device scripts carry, in git-ignored folders.
#   .whl/     wheels the GPU image lacks (datasketch, datasets + dill/multiprocess, transformers 5.24 to match
#             the vocabulary), installed there with --no-deps into /tmp/site by the device scripts;
#   .devdata/ the offline KernelBench copy and 200 gpu-profile candidates for scripts/device_calibrate.py.
# Then call the device tool with carry [".devdata", ".whl"] and e.g. `N=100 OUT=$OUT bash scripts/device_build.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
for path in /.whl/ /.devdata/; do grep -qx "$path" .git/info/exclude || echo "$path" >> .git/info/exclude; done
PY=${PY:-.venv/bin/python}
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
    transformers==5.24.0 datasketch==2.0.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
mkdir -p .devdata
cp "${KERNELBENCH:-../shared/kernelbench/problems.jsonl}" .devdata/problems.jsonl
"$PY" -m opgen sample --n 200 --seed 2026 --profile gpu --out .devdata/gpu200.jsonl --workers 2
du -sh .whl .devdata
