"""The run folder: config, numbered shards with completion markers, round files, logs, final outputs.

Layout (every data file is written atomically, then its `.done` marker; a rerun trusts only marked files):

    RUN_DIR/config.json                      the build config (a rerun with another config is refused)
    RUN_DIR/rounds/RRR/plan.json             the candidate ranges of round RRR and their shard numbers
    RUN_DIR/rounds/RRR/dedup.jsonl  + .done  dedup/decontamination verdicts of the round
    RUN_DIR/rounds/RRR/survivors.jsonl + round.done
    RUN_DIR/shards/NNNNN/candidates.jsonl    sampled candidates of shard NNNNN
    RUN_DIR/shards/NNNNN/<stage>.jsonl + <stage>.done   verdicts (or timed records) of one stage
    RUN_DIR/tasks.parquet, rejected.jsonl, stats.json, logs/build.log
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from opgen.errors import UsageError
from opgen.jsonl import file_in_the_way, read_jsonl, write_jsonl

# Fault injection for the resume tests: the process os._exit()s right after writing this many markers.
FAULT_ENV = "OPGEN_FAULT_AFTER_MARKERS"


def write_json(path: Path, data: dict) -> None:
    """Write JSON atomically (temp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


class RunDir:
    """One build's folder: stage outputs per shard and per round, each trusted only once its marker exists."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.markers_written = 0
        self.on_mark = None   # called after each marker (the build saves its state from it: see state.py)
        self._rows: dict[Path, list[dict]] = {}   # stage files never change once written: read each once
        fault = os.environ.get(FAULT_ENV, "").strip()
        self._fault_after = int(fault) if fault.isdigit() else None

    # config ---------------------------------------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.root / "config.json"

    def claim(self, config: dict) -> bool:
        """Write the config on a fresh folder, or check it equals the stored one; True when resuming.

        A folder that cannot be created, read or written is one UsageError line."""
        try:
            return self._claim(config)
        except OSError as error:
            blocker = file_in_the_way(self.root / "config.json")
            why = f"{blocker} is not a folder" if blocker is not None else error.strerror or error
            raise UsageError(f"cannot use {self.root} as the run folder: {why}") from None

    def _claim(self, config: dict) -> bool:
        if self.config_path.is_file():
            stored = json.loads(self.config_path.read_text(encoding="utf-8"))
            if stored != config:
                changed = sorted(k for k in set(stored) | set(config) if stored.get(k) != config.get(k))
                raise UsageError(f"{self.root} holds a build with another config (differs in: {', '.join(changed)}); "
                                 "rerun with the same options or choose another --out")
            return True
        if self.root.exists() and any(self.root.iterdir()):
            raise UsageError(f"{self.root} exists and is not an opgen run folder (no config.json)")
        write_json(self.config_path, config)
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        return False

    # shards and rounds ----------------------------------------------------------------------------------
    def shard_dir(self, shard: int) -> Path:
        return self.root / "shards" / f"{shard:05d}"

    def round_dir(self, round_index: int) -> Path:
        return self.root / "rounds" / f"{round_index:03d}"

    def done(self, folder: Path, stage: str) -> dict | None:
        """The marker of `stage` in `folder` (its JSON payload), or None when the stage has not finished."""
        marker = folder / f"{stage}.done"
        if not marker.is_file():
            return None
        return json.loads(marker.read_text(encoding="utf-8"))

    def rows(self, folder: Path, name: str) -> list[dict]:
        """The rows of `folder/name.jsonl` (read once, then kept; callers must not modify them)."""
        path = folder / f"{name}.jsonl"
        if path not in self._rows:
            self._rows[path] = read_jsonl(path) if path.is_file() else []
        return self._rows[path]

    def write_rows(self, folder: Path, name: str, rows: list[dict]) -> None:
        path = folder / f"{name}.jsonl"
        write_jsonl(path, rows)
        self._rows[path] = list(rows)

    def mark(self, folder: Path, stage: str, payload: dict | None = None) -> None:
        """Write the completion marker of `stage` (after its data files), then honour fault injection."""
        write_json(folder / f"{stage}.done", payload or {})
        self.markers_written += 1
        self._tick()
        if self.on_mark is not None:
            self.on_mark()
        if self._fault_after is not None and self.markers_written >= self._fault_after:
            logging.getLogger("opgen.build").warning("fault injection: exiting after %d markers", self.markers_written)
            os._exit(137)

    # wall clock across invocations ---------------------------------------------------------------------
    @property
    def clock_path(self) -> Path:
        return self.root / "logs" / "clock.json"

    def start_clock(self) -> None:
        """Open this invocation's entry in logs/clock.json; every marker moves its end, so a killed run's time
        counts up to its last marker."""
        spans = json.loads(self.clock_path.read_text(encoding="utf-8")) if self.clock_path.is_file() else []
        now = time.time()
        self._spans = [*spans, [now, now]]
        write_json(self.clock_path, self._spans)

    def _tick(self) -> None:
        if getattr(self, "_spans", None):
            self._spans[-1][1] = time.time()
            write_json(self.clock_path, self._spans)

    def recorded_seconds(self) -> float:
        """Seconds the build has run over every invocation, as logs/clock.json says (read, never moved on)."""
        spans = json.loads(self.clock_path.read_text(encoding="utf-8")) if self.clock_path.is_file() else []
        return sum(end - start for start, end in spans)

    def wall_seconds(self) -> float:
        """Seconds the build has run, over every invocation."""
        self._tick()
        return sum(end - start for start, end in getattr(self, "_spans", []))

    # outputs --------------------------------------------------------------------------------------------
    @property
    def tasks_path(self) -> Path:
        return self.root / "tasks.parquet"

    @property
    def stats_path(self) -> Path:
        return self.root / "stats.json"

    @property
    def rejected_path(self) -> Path:
        return self.root / "rejected.jsonl"

    def open_log(self) -> logging.Logger:
        """The build logger, appending to RUN_DIR/logs/build.log."""
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        logger = logging.getLogger("opgen.build")
        logger.setLevel(logging.INFO)
        path = str((self.root / "logs" / "build.log").resolve())
        for handler in list(logger.handlers):
            if isinstance(handler, logging.FileHandler):
                logger.removeHandler(handler)
                handler.close()
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
        return logger

    def close_log(self) -> None:
        logger = logging.getLogger("opgen.build")
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
            handler.close()
