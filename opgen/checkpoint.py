"""Resumable batch commands: each finished chunk of inputs is logged beside the output, so a rerun skips it.

`opgen validate` and `opgen time` process their inputs in chunks and append every finished chunk to
`OUT.partial` (fsynced). Killed and run again with the same inputs and options, they reuse the logged
chunks and compute only the rest; a log written for other inputs or options is discarded. The final
output is written once, in input order, and the log is removed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

log = logging.getLogger("opgen.checkpoint")


def inputs_identity(records: list[dict], **options) -> dict:
    """What decides a command's results: a hash of the inputs' ids and code, and the options."""
    digest = hashlib.sha256()
    for record in records:
        digest.update(json.dumps([record.get("id"), record.get("code")]).encode())
    return {"inputs_sha256": digest.hexdigest(), "inputs": len(records), **options}


class ChunkLog:
    """The append-only log `OUT.partial` of a command's finished chunks."""

    def __init__(self, out: str | Path, identity: dict):
        self.path = Path(f"{out}.partial")
        self.identity = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()

    def load(self) -> dict[int, dict]:
        """Finished chunks by their first input index. A line cut short by a kill ends the valid part and is
        cut off; a log of another command (other inputs or options) is discarded."""
        if not self.path.is_file():
            return {}
        chunks: dict[int, dict] = {}
        valid_bytes = 0
        with open(self.path, "rb") as handle:
            for number, raw in enumerate(handle):
                try:
                    entry = json.loads(raw)
                except json.JSONDecodeError:
                    break
                if not raw.endswith(b"\n"):
                    break
                if number == 0 and entry.get("identity") != self.identity:
                    log.warning("%s was written for other inputs or options; starting afresh", self.path)
                    self.path.unlink()
                    return {}
                if number > 0:
                    chunks[entry["start"]] = entry
                valid_bytes += len(raw)
        if valid_bytes < self.path.stat().st_size:
            with open(self.path, "r+b") as handle:
                handle.truncate(valid_bytes)
        return chunks

    def append(self, start: int, lines: list[dict], extra: object = None) -> None:
        new = not self.path.is_file() or self.path.stat().st_size == 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as handle:
            if new:
                handle.write(json.dumps({"identity": self.identity}) + "\n")
            handle.write(json.dumps({"start": start, "lines": lines, "extra": extra}) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def finish(self) -> None:
        self.path.unlink(missing_ok=True)


def run_in_chunks(records: list[dict], chunk_size: int, process: Callable[[list[dict]], tuple[list[dict], object]],
                  chunk_log: ChunkLog, desc: str, progress: bool = True) -> tuple[list[dict], list[object], int]:
    """`process` every chunk not already in `chunk_log`; returns (lines in input order, each chunk's extra,
    how many inputs were reused from the log)."""
    done = chunk_log.load()
    lines: list[dict] = []
    extras: list[object] = []
    reused = 0
    bar = tqdm(total=len(records), desc=desc, unit="task", file=sys.stderr, disable=not progress,
               dynamic_ncols=True)
    try:
        for start in range(0, len(records), chunk_size):
            chunk = records[start:start + chunk_size]
            entry = done.get(start)
            if entry is not None and len(entry["lines"]) == len(chunk):
                chunk_lines, extra = entry["lines"], entry.get("extra")
                reused += len(chunk)
            else:
                chunk_lines, extra = process(chunk)
                chunk_log.append(start, chunk_lines, extra)
            lines += chunk_lines
            extras.append(extra)
            bar.update(len(chunk))
    finally:
        bar.close()
    return lines, extras, reused
