"""A run folder from what a build leaves: the folder itself, or its state file (--save-state) restored into scratch."""

from __future__ import annotations

from pathlib import Path

from opgen.errors import UsageError
from opgen.pipeline.rundir import RunDir


def run_folder(path: Path, scratch: Path, with_outputs: bool = False) -> Path:
    """`path` itself when it is a run folder, else the run folder its build state holds, restored into `scratch`
    under the config it was saved with; `with_outputs`: with the tasks finished so far written out as a finished
    build writes them (tasks.parquet, rejected.jsonl, stats.json). UsageError (one line) when `path` is neither, or
    the state is not whole."""
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UsageError(f"{path} is not an opgen run folder (no config.json)")
        return path
    if not path.is_file():
        raise UsageError(f"no run folder or build state at {path}")
    if with_outputs:
        from opgen.pipeline.preview import preview_state

        preview_state(path, scratch)
        return scratch
    from opgen.pipeline.state import restore_state

    restore_state(path, RunDir(scratch), None)
    return scratch
