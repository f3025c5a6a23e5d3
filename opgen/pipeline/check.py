"""`opgen check`: run rows of a published dataset again in fresh sandboxed processes and say which fail.

Each row drawn is validated as a build validates a candidate (it runs, is deterministic, passes the degenerate
check and the grader-proof rules, and compiles within the tolerance), so must each of its held-out input
configurations (`held_out_sizes`), its recorded eager time (a GPU's) must lie in the window, and on CUDA its eager time is measured again with the build's timing method and compared with the
recorded one. The window judges the recorded time, the row's promise, not the new one: a task recorded at 1.02 ms
may time at 0.98 ms the next time (two such tasks at the 1 ms edge of an n = 300 build, docs/benchmarks.md), and
that is agreement, counted apart (`retimed_outside_window`)."""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field

from filters.validate import validate_records
from filters.window import Window
from opgen.errors import UsageError
from opgen.heldout.stage import check_held_out
from opgen.publish.reading import load_tasks, resolve_dataset
from opgen.sandbox.confine import confined_on
from opgen.timing.driver import TimingOptions, time_records

CHECK_FIELDS = ("id", "code", "flops", "bytes_moved", "eager_ms", "hardware", "held_out_sizes")


@dataclass
class CheckReport:
    """What `opgen check` found: the rows drawn, those that failed and why, and the timing agreement."""

    folder: str
    rows: int
    drawn: int
    failures: list[dict] = field(default_factory=list)      # {"id", "reason", "detail"}
    timing: dict | None = None                              # the agreement summary, on CUDA
    tasks: list[dict] = field(default_factory=list)          # one entry per drawn row

    def as_dict(self) -> dict:
        return {"folder": self.folder, "rows": self.rows, "drawn": self.drawn, "failed": len(self.failures),
                "failures": self.failures, "timing": self.timing, "tasks": self.tasks}


def draw_rows(rows: list[dict], sample: int | None, seed: int) -> list[dict]:
    """`sample` rows drawn at random (all of them when None or larger), in the dataset's order."""
    if sample is None or sample >= len(rows):
        return list(rows)
    chosen = sorted(random.Random(seed).sample(range(len(rows)), sample))
    return [rows[i] for i in chosen]


def ratio_summary(pairs: list[tuple[float, float]]) -> dict:
    """Two timings of the same tasks, (a, b) each: the median and p10-p90 of a/b and the correlation of their
    logarithms (from 2 pairs on; `tasks` alone below that)."""
    if len(pairs) < 2:
        return {"tasks": len(pairs)}
    ratios = sorted(a / b for a, b in pairs)
    return {"tasks": len(pairs), "median_ratio": statistics.median(ratios), "p10_ratio": ratios[len(ratios) // 10],
            "p90_ratio": ratios[(9 * len(ratios)) // 10],
            "log_correlation": statistics.correlation([math.log(a) for a, _ in pairs], [math.log(b) for _, b in pairs])}


def agreement(pairs: list[tuple[float, float]], tolerance: float) -> dict:
    """`ratio_summary` of recorded/new eager times, and how many rows differ by more than `tolerance`."""
    outside = sum(abs(math.log(recorded / new)) > math.log(1 + tolerance) for recorded, new in pairs)
    return {**ratio_summary(pairs), "tolerance": tolerance, "outside": outside}


def timed_on_gpu(row: dict) -> bool:
    """Whether the row's eager time was taken on a GPU, where the window applies (a CPU build's times are not)."""
    return row.get("eager_ms") is not None and not str(row.get("hardware") or "").startswith("cpu")


def check_dataset(dataset: str, *, sample: int | None = 300, seed: int = 0, device: str = "cuda", workers: int = 2,
                  timing_workers: int | None = None, memory_mb: int | None = 4096, timeout_s: float = 300.0,
                  time_tolerance: float = 0.25, out: str | None = None, progress: bool = True,
                  config: str = "default") -> CheckReport:
    """Check `sample` rows of a dataset folder or Hub id (its `config`: a precision such as bf16); see the module
    docstring."""
    folder, _ = resolve_dataset(dataset, out)
    rows = load_tasks(folder, CHECK_FIELDS, fresh=True, config=config)   # the files as they are now
    if not rows:
        raise UsageError(f"{folder} holds no task")
    drawn = draw_rows(rows, sample, seed)
    report = CheckReport(str(folder), len(rows), len(drawn))
    records = [{"id": row["id"], "source": row["id"], "code": row["code"]} for row in drawn]
    # a dataset may come from anywhere (a Hub id): its code runs in confined workers, as a solution's does
    confined = confined_on(device)
    verdicts = validate_records(records, device=device, workers=workers, timeout_s=timeout_s, memory_mb=memory_mb,
                                progress=progress, confined=confined)
    held_out = check_held_out(drawn, device=device, workers=workers, timeout_s=timeout_s, memory_mb=memory_mb,
                              progress=progress, confined=confined)
    timed = {}
    if device == "cuda":
        options = TimingOptions(device="cuda", with_compile=False)
        timed = {r["id"]: r for r in time_records(drawn, options, timeout_s=timeout_s, progress=progress,
                                                     workers_per_gpu=timing_workers, memory_mb=memory_mb,
                                                     confined=confined)}
    pairs = []
    retimed_outside = 0
    for row, verdict, configs in zip(drawn, verdicts, held_out):
        entry = {"id": row["id"], "reason": verdict.get("reason"), "recorded_ms": row.get("eager_ms"),
                 "held_out": len(configs), "held_out_failed": sum(1 for c in configs if c["reason"])}
        if not verdict["keep"]:
            report.failures.append({"id": row["id"], "reason": verdict["reason"], "detail": verdict.get("detail")})
        for config in configs:
            if config["reason"]:
                sizes = ",".join(f"{name}={value}" for name, value in config["sizes"].items())
                report.failures.append({"id": row["id"], "reason": config["reason"],
                                        "detail": f"held-out sizes {sizes}: {config['detail']}"})
        if timed_on_gpu(row) and not (recorded := Window().verdict(row["eager_ms"])).keep:
            report.failures.append({"id": row["id"], "reason": recorded.reason,
                                    "detail": f"the recorded time: {recorded.detail}"})
        if device == "cuda":
            new = timed.get(row["id"], {}).get("eager_ms")
            entry["eager_ms"] = new
            if new is None:
                report.failures.append({"id": row["id"], "reason": "timing_error",
                                        "detail": timed.get(row["id"], {}).get("timing_error")})
            else:
                retimed_outside += not Window().verdict(new).keep
            if new and row.get("eager_ms"):
                pairs.append((row["eager_ms"], new))
        report.tasks.append(entry)
    if device == "cuda":
        report.timing = {**agreement(pairs, time_tolerance), "retimed_outside_window": retimed_outside}
    return report
