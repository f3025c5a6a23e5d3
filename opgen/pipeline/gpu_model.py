"""One GPU model per build: the model of its first timed run, and the refusal to time its later runs on another."""

from __future__ import annotations

from opgen.errors import UsageError
from opgen.pipeline.rundir import RunDir


def recorded_gpu_model(rundir: RunDir) -> str | None:
    """The GPU the build's timed rows were taken on (the first shard's, in shard order), None before any."""
    for folder in sorted(rundir.root.glob("shards/*")):
        if rundir.done(folder, "timing") is None:
            continue
        for row in rundir.rows(folder, "timed"):
            if row.get("hardware"):
                return str(row["hardware"])
    return None


def require_recorded_gpu_model(rundir: RunDir, models: list[str]) -> None:
    """UsageError (one line, exit 2) unless every GPU in `models` is the one the build's baselines were taken on: a
    dataset's baselines compare tasks with each other only when one GPU model timed them all."""
    recorded = recorded_gpu_model(rundir)
    others = sorted({model for model in models if model != recorded})
    if recorded is not None and others:
        raise UsageError(f"this build's baselines were taken on {recorded}, this machine has {', '.join(others)}: "
                         f"continue it on a {recorded} (one GPU model per build), or start another build with "
                         "another --out")
