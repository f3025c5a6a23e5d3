"""Independent check of a build's eager baselines: time its tasks again with a plain script, PyTorch's default
settings, one process, one task at a time (CUDA events, L2 flush, 5 warm-ups, median of 30), no opgen code in the timing
(opgen only reads the run folder).

    python scripts/analysis/agreement.py RUN_DIR/tasks.parquet OUT.json [--limit 100]
    python scripts/analysis/agreement.py RUN_DIR OUT.json          # a run folder: its tasks, or (unfinished) its timed survivors
    python scripts/analysis/agreement.py DATASET/data OUT.json --sample 200 --seed 0   # 200 random published rows

Prints and writes: the median ratio dataset/independent, the log-correlation, p10-p90 of the ratio, how many rows
agree within 5% and 10% and how many the dataset has over 1.25x and 1.5x slower or faster, and the same for
convolution and recurrent tasks (the ones TF32 precision moves).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opgen.pipeline.check import ratio_summary  # noqa: E402
from opgen.pipeline.report import kept_by_key  # noqa: E402
from opgen.pipeline.rundir import RunDir  # noqa: E402

CONV_RNN = ("Conv", "conv", "LSTM", "GRU", "RNN")


def time_task(code: str, trials: int = 30, warmups: int = 5) -> float:
    namespace: dict = {"__name__": "task"}
    exec(compile(code, "<task>", "exec"), namespace)
    torch.manual_seed(0)
    model = namespace["Model"](*namespace["get_init_inputs"]()).eval().cuda()
    torch.manual_seed(1)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in namespace["get_inputs"]()]
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    with torch.no_grad():
        for _ in range(warmups):
            model(*inputs)
        torch.cuda.synchronize()
        for _ in range(trials):
            flush.zero_()
            start.record()
            model(*inputs)
            end.record()
            torch.cuda.synchronize()
            samples.append(start.elapsed_time(end))
    del model, inputs, flush
    torch.cuda.empty_cache()
    return statistics.median(samples)


def summary(pairs: list[tuple[float, float]]) -> dict:
    """`ratio_summary` of (dataset, independent) pairs, and the counts of the agreement bounds."""
    ratios = [a / b for a, b in pairs]
    return {**ratio_summary(pairs),
            "within_5pct": sum(abs(r - 1) <= 0.05 for r in ratios), "within_10pct": sum(abs(r - 1) <= 0.10 for r in ratios),
            "dataset_slower_1.25x": sum(r > 1.25 for r in ratios), "dataset_slower_1.5x": sum(r > 1.5 for r in ratios),
            "dataset_faster_1.25x": sum(r < 1 / 1.25 for r in ratios), "dataset_faster_1.5x": sum(r < 1 / 1.5 for r in ratios)}


def read_rows(path: str) -> list[dict]:
    """A tasks parquet, a folder of parquet shards (a published dataset's data/), a run folder's tasks.parquet,
    or the timed survivors of an unfinished run folder (each finished shard's timed records that its timing
    verdicts keep), in sample order."""
    folder = Path(path)
    if folder.is_dir() and (folder / "tasks.parquet").is_file():
        folder = folder / "tasks.parquet"
    if not folder.is_dir():
        return pq.read_table(folder).to_pylist()
    if not (folder / "shards").is_dir():
        return [row for shard in sorted(folder.glob("*.parquet")) for row in pq.read_table(shard).to_pylist()]
    run = RunDir(folder)
    rows = [row for shard in sorted((folder / "shards").iterdir()) if run.done(shard, "timing") is not None
            for row in kept_by_key(run.rows(shard, "timed"), run.rows(shard, "timing"))]
    return sorted(rows, key=lambda r: r["sample_index"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks")
    parser.add_argument("out")
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--budget-s", type=float, default=1e9)
    parser.add_argument("--sample", type=int, default=None, help="time N rows drawn at random (--seed) instead")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = [r for r in read_rows(args.tasks) if r.get("eager_ms")]
    rows = random.Random(args.seed).sample(rows, min(args.sample, len(rows))) if args.sample else rows[: args.limit]
    started, results = time.monotonic(), []
    for row in rows:
        if time.monotonic() - started > args.budget_s:
            break
        try:
            ms = time_task(row["code"])
        except Exception as error:  # noqa: BLE001 - report and go on
            results.append({"id": row["id"], "error": f"{type(error).__name__}: {error}"[:300]})
            continue
        results.append({"id": row["id"], "ops": row["ops"], "dataset_ms": row["eager_ms"], "independent_ms": ms,
                        "precision": row.get("precision"), "rechecked": row.get("timing_rechecked"),
                        "conv_or_rnn": any(k in op for op in row["ops"] for k in CONV_RNN)})
    timed = [r for r in results if "independent_ms" in r]
    report = {"all": {**summary([(r["dataset_ms"], r["independent_ms"]) for r in timed]),
                      "rechecked": sum(1 for r in timed if r["rechecked"])},
              "conv_or_rnn": summary([(r["dataset_ms"], r["independent_ms"]) for r in timed if r["conv_or_rnn"]]),
              "errors": [r for r in results if "error" in r],
              "worst": sorted(timed, key=lambda r: -abs(math.log(r["dataset_ms"] / r["independent_ms"])))[:10],
              "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
              "settings": {"matmul_tf32": torch.backends.cuda.matmul.allow_tf32,
                           "cudnn_tf32": torch.backends.cudnn.allow_tf32}}
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump({**report, "rows": results}, handle, indent=1)
    print(json.dumps({k: report[k] for k in ("all", "conv_or_rnn", "settings")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
