"""A run folder from what a build leaves: the folder itself, or its state file (--save-state) restored into scratch."""

from __future__ import annotations

import argparse
from pathlib import Path

from opgen.errors import UsageError
from opgen.pipeline.rundir import RunDir
from opgen.pipeline.state import restore_state


def run_folder(path: Path, scratch: Path, with_outputs: bool = False) -> Path:
    """`path` itself when it is a folder, else the run folder its build state holds, restored into `scratch` under
    the config it was saved with; `with_outputs`: with the tasks finished so far written out as a finished build
    writes them (tasks.parquet, rejected.jsonl, stats.json). UsageError (one line) when `path` is neither, or the
    state is not whole."""
    if path.is_dir():
        return path
    if not path.is_file():
        raise UsageError(f"no run folder or build state at {path}")
    if with_outputs:
        from opgen.pipeline.preview import preview_state

        preview_state(path, scratch)
        return scratch
    restore_state(path, RunDir(scratch), None)
    return scratch


def add_run_arguments(parser: argparse.ArgumentParser, json_help: str) -> None:
    """The arguments of a script that reads one build: RUN_DIR (a run folder or a state file) and --json OUT."""
    parser.add_argument("run_dir", type=Path, help="a run folder, or a build's state file (--save-state)")
    parser.add_argument("--json", type=Path, help=json_help)
