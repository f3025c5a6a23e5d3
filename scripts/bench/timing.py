"""Timing figures: `report` compares timed runs (repeatability, method agreement, KernelBench H100 ranks);
`bench()` (the default) times a few small tasks on the CPU and prints throughput."""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from opgen.errors import UsageError  # noqa: E402
from opgen.jsonl import read_jsonl  # noqa: E402
from opgen.timing.driver import time_records, timing_summary  # noqa: E402

KB_TIMING = ROOT.parent / "shared" / "kernelbench" / "timing"

CPU_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.tanh(self.linear(x)) + {k}


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return [256]
'''


def _quantiles(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    values = sorted(values)
    pick = lambda q: values[min(len(values) - 1, int(q * (len(values) - 1) + 0.5))]  # noqa: E731
    return {"n": len(values), "median": statistics.median(values), "p10": pick(0.1), "p90": pick(0.9),
            "max": values[-1]}


def repeat_agreement(first: list[dict], second: list[dict], column: str) -> dict:
    """|a - b| / mean(a, b) in % per task timed in both runs (matched by id)."""
    by_id = {r["id"]: r for r in second}
    diffs = [100 * abs(r[column] - by_id[r["id"]][column]) / ((r[column] + by_id[r["id"]][column]) / 2)
             for r in first if r.get(column) and by_id.get(r["id"], {}).get(column)]
    return _quantiles(diffs)


def method_agreement(timed: list[dict], prefix: str) -> dict:
    """Profiler device time / CUDA-events median, per task."""
    return _quantiles([r[f"{prefix}_device_us"] / 1e3 / r[f"{prefix}_ms"] for r in timed
                       if r.get(f"{prefix}_device_us") and r.get(f"{prefix}_ms")])


def spearman(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 3:
        return None
    rank = lambda v: {i: r for r, i in enumerate(sorted(range(len(v)), key=v.__getitem__))}  # noqa: E731
    rx, ry = rank(xs), rank(ys)
    n = len(xs)
    return 1 - 6 * sum((rx[i] - ry[i]) ** 2 for i in range(n)) / (n * (n * n - 1))


def kernelbench_comparison(timed: list[dict], kb_timing: Path = KB_TIMING, level: str = "level2") -> dict:
    """Rank correlation and median ratio of our times against KernelBench's published H100 means."""
    out = {}
    for prefix, name in (("eager", "H100_Modal_baseline_time_torch.json"),
                         ("compile", "H100_Modal_baseline_time_torch_compile_inductor_default.json")):
        path = Path(kb_timing) / name
        if not path.exists():
            continue
        reference = json.loads(path.read_text())[level]
        pairs = [(r[f"{prefix}_ms"], reference[r["name"]]["mean"]) for r in timed
                 if r.get("name") in reference and r.get(f"{prefix}_ms")]
        if pairs:
            ours, theirs = zip(*pairs)
            out[prefix] = {"n": len(pairs), "spearman": spearman(list(ours), list(theirs)),
                           "median_ratio_h100_over_ours": statistics.median(t / o for o, t in pairs)}
    return out


def report(paths: list[str], kb_timing: Path = KB_TIMING) -> dict:
    runs = [read_jsonl(path) for path in paths]
    figures: dict = {"runs": {path: timing_summary(run) for path, run in zip(paths, runs)}}
    first = runs[0]
    figures["method_agreement"] = {p: method_agreement(first, p) for p in ("eager", "compile")}
    if len(runs) > 1:
        figures["repeat_agreement_pct"] = {c: repeat_agreement(first, runs[1], c)
                                           for c in ("eager_ms", "compile_ms", "eager_device_us", "compile_device_us")}
    figures["kernelbench_h100"] = kernelbench_comparison(first, kb_timing)
    figures["out_of_window"] = [(r.get("name") or r["id"], r["eager_ms"]) for r in first
                                if r.get("eager_ms") is not None and not 1.0 <= r["eager_ms"] <= 100.0]
    figures["failed"] = [(r.get("name") or r["id"], r.get("timing_error", "")[:160]) for r in first
                         if r.get("eager_ms") is None or r.get("compile_ms") is None]
    figures["hardware"] = {k: first[0].get(k) for k in ("hardware", "compute_capability", "torch_version",
                                                          "cuda_version", "triton_version", "tf32", "timing_method")}
    return figures


def bench(n_tasks: int = 4, trials: int = 20) -> dict:
    """Time `n_tasks` small tasks on the CPU through the full harness; print throughput and the summary."""
    records = [{"id": f"cpu-{k}", "code": CPU_TASK.replace("{k}", str(k))} for k in range(n_tasks)]
    with tempfile.TemporaryDirectory() as cache:
        started = time.perf_counter()
        timed = time_records(records, device="cpu", trials=trials, warmups=3, progress=False, cache_dir=cache)
        wall = time.perf_counter() - started
    figures = {"timing_cpu": {**timing_summary(timed, lo_ms=0.0, hi_ms=1e9), "wall_s": round(wall, 2),
                              "tasks_per_min": round(60 * n_tasks / wall, 2), "trials": trials}}
    print(json.dumps(figures, indent=1))
    return figures


def run_time_command(argv: list[str]) -> int:
    """`opgen time` without importing the other subcommands (whose dependencies a GPU image may lack)."""
    spec = importlib.util.spec_from_file_location("opgen_time_command", ROOT / "opgen" / "commands" / "time.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    parser = argparse.ArgumentParser(prog="opgen")
    module.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["time", *argv])
    try:
        return args.func(args)
    except UsageError as error:
        print(f"opgen: error: {error}", file=sys.stderr)
        return 2


def main() -> None:
    if sys.argv[1:2] == ["time"]:
        sys.exit(run_time_command(sys.argv[2:]))
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command")
    rep = sub.add_parser("report", help="figures from one or two timed JSONL files")
    rep.add_argument("timed", nargs="+")
    rep.add_argument("--kb-timing", default=str(KB_TIMING), help="folder of KernelBench's published timings")
    sub.add_parser("cpu", help="small CPU run through the harness (default)")
    args = parser.parse_args()
    if args.command == "report":
        print(json.dumps(report(args.timed, Path(args.kb_timing)), indent=1))
    else:
        bench()


if __name__ == "__main__":
    main()
