"""Benchmark: `opgen validate` throughput (2 sandboxed workers, CPU) against the raw cost of eager + compile.

The raw cost is measured in one warm process (its first-compile set-up is paid before the clock starts),
running each task once eagerly and once under torch.compile. Validation is measured the same way: its
pool's workers first compile a warm-up task each (the start-up a long run pays once; the build keeps its
pool across shards), then the clock runs over the tasks. The cold figure, start-up included, is printed
too. Both runs start from an empty inductor cache.
Goal: warm validation wall time / raw wall time <= 1.25.  Run: `python scripts/bench/validate.py [N]`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
KERNELBENCH = Path("/work/shared/kernelbench/problems.jsonl")

RAW_LOOP = r"""
import json, sys, time, torch
from opgen.sandbox.task import build_model, draw_inputs, load_namespace, run_forward
records = [json.loads(line) for line in open(sys.argv[1])]
warm = torch.compile(torch.nn.Linear(3, 3))
warm(torch.randn(2, 3))  # pay the first-compile set-up before the clock starts
start = time.perf_counter()
for record in records:
    torch._dynamo.reset()
    namespace = load_namespace(record["code"], record["id"])
    model = build_model(namespace, "cpu", 0)
    inputs = draw_inputs(namespace, "cpu", 1)
    run_forward(model, inputs)
    run_forward(torch.compile(model), inputs)
print(json.dumps({"seconds": time.perf_counter() - start}))
"""


def kernelbench_tasks(count: int) -> list[dict]:
    from scripts.devtools.shrink import shrink_sizes

    rows = [json.loads(line) for line in KERNELBENCH.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r["level"] <= 2 and "Dropout" not in r["name"]]
    step = max(1, len(rows) // count)
    return [{"id": f"kb-{r['level']}-{r['problem_id']}", "source": r["name"], "code": shrink_sizes(r["code"])}
            for r in rows[::step][:count]]


def raw_seconds(tasks: list[dict], cache_dir: str) -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as handle:
        handle.write("".join(json.dumps(t) + "\n" for t in tasks))
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir, PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, "-c", RAW_LOOP, handle.name], env=env, capture_output=True,
                            text=True, check=True)
    os.unlink(handle.name)
    return json.loads(result.stdout.strip().splitlines()[-1])["seconds"]


WARM_UP_TASK = """import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)

    def forward(self, x):
        return torch.tanh(self.linear(x))


def get_inputs():
    return [torch.randn(2, 3)]


def get_init_inputs():
    return []
"""


def validate_seconds(tasks: list[dict], cache_dir: str, workers: int) -> tuple[float, float, int]:
    """(warm seconds, start-up seconds, kept): the pool's workers start and compile one warm-up task each,
    then the tasks are validated by the same pool."""
    from filters.validate import execute_verdicts

    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    start = time.perf_counter()
    warm_up = [{"id": f"warm-up-{k}", "code": WARM_UP_TASK.replace("(3, 3)", f"(3, {3 + k})")} for k in range(workers)]
    execute_verdicts(warm_up, workers=workers, timeout_s=300, reuse_pool=True)
    started = time.perf_counter()
    lines = execute_verdicts(tasks, workers=workers, timeout_s=300, reuse_pool=True)
    return time.perf_counter() - started, started - start, sum(line["keep"] for line in lines)


def bench_validate(count: int = 40, workers: int = 2) -> dict:
    """Print and return validation wall time, raw eager+compile time, and their ratio."""
    tasks = kernelbench_tasks(count)
    with tempfile.TemporaryDirectory() as raw_cache, tempfile.TemporaryDirectory() as validate_cache:
        raw = raw_seconds(tasks, raw_cache)
        validated, startup, kept = validate_seconds(tasks, validate_cache, workers)
    figures = {"tasks": len(tasks), "workers": workers, "kept": kept, "raw_eager_compile_s": round(raw, 2),
               "validate_s": round(validated, 2), "startup_s": round(startup, 2),
               "tasks_per_s": round(len(tasks) / validated, 3), "overhead": round(validated / raw, 3),
               "overhead_cold": round((validated + startup) / raw, 3)}
    print(f"validate: {figures['tasks']} shrunk KernelBench tasks, {workers} warm workers: {validated:.1f} s "
          f"({figures['tasks_per_s']} tasks/s, {kept} kept); pool start-up and warm-up compile {startup:.1f} s")
    print(f"raw eager + compile, one warm process: {raw:.1f} s")
    print(f"overhead (validate / raw): {figures['overhead']:.2f}x warm  (goal <= 1.25x), "
          f"{figures['overhead_cold']:.2f}x with the start-up")
    return figures


if __name__ == "__main__":
    bench_validate(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
