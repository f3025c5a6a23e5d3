"""The dataset of a build under way, from its state file: restored into a run folder, the tasks finished so far
written as a finished build writes them (tasks.parquet, stats.json), nothing run."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import fields
from pathlib import Path

from opgen.pipeline import rounds
from opgen.pipeline.build import Build
from opgen.pipeline.config import BuildConfig, BuildResult
from opgen.pipeline.executors import LocalExecutor
from opgen.pipeline.report import write_outputs
from opgen.pipeline.rundir import RunDir
from opgen.pipeline.state import restore_state

TUPLE_FIELDS = ("vocab_plugins", "runtime_window_ms", "focus")


def config_of(identity: dict) -> BuildConfig:
    """The BuildConfig a run folder's config.json (a state's `config`) was written from."""
    names = {f.name for f in fields(BuildConfig)}
    options = {key: value for key, value in identity.items() if key in names}
    for key in TUPLE_FIELDS:
        if key in options:
            options[key] = tuple(options[key])
    return BuildConfig(**options)


def preview_state(state_file: str | Path, run_dir: str | Path) -> tuple[BuildResult, dict]:
    """Restore `state_file` into `run_dir` (empty, or the same build's) and write the tasks finished so far there;
    the result, and per data_source the shards planned, executed and finished and the tasks so far."""
    rundir = RunDir(run_dir)
    restore_state(state_file, rundir, None)
    identity = json.loads(rundir.config_path.read_text(encoding="utf-8"))
    build = Build(config_of(identity), run_dir, LocalExecutor(1), progress=False)
    survivors = build.read_back()
    chosen, surplus = rounds.select(survivors, build.wanted)
    result = write_outputs(build, chosen, surplus, survivors, 0.0, unfinished=True)
    shards: dict[str, Counter] = {}
    for state in build.rounds:
        for shard in state.shards:
            counts = shards.setdefault(state.sources.get(shard) or "mix", Counter())
            counts["planned"] += 1
            counts["executed"] += shard in state.executed
            counts["finished"] += build._done_shard(state, shard)
    tasks = Counter(r["data_source"] for r in chosen)
    progress = {source: {**counts, "tasks": tasks[source], "quota": build.wanted.get(source)}
                for source, counts in shards.items()}
    return result, progress
