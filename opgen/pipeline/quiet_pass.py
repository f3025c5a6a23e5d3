"""The quiet pass: a build's launch-bound rows timed again with nothing else running on the machine.

A launch-bound task (a recurrent cell, a chain of tiny kernels) runs at the speed of the host thread that launches its
kernels, so its CUDA-event time follows the host's load. Inside a build the other stages keep the cores busy, and
the timing guard's quiet hold (opgen/timing/guard.py) pauses only the sandbox workers, not the build's own
processes: on one H100, 150 rows of the 6,000-task build drawn at random against an independent one-process timer
on a quiet machine had 7 rows recorded 1.27-2.25x slow, every one recurrent and every one flagged by the guard's
`host` rule (its events' median well above its device time).

So when the build has nothing else to do (first thing in a CUDA call that resumes a run folder, and once its last
shard is timed, before the dataset is written) it times every published row that needs it (`needs_quiet_pass`: a
`host` suspicion, now or in its first timing) again, in timing workers of its own, each timed section with the others
paused. Each row keeps, for eager and compile each, the faster median (sharing only ever slows a measurement), says
so in `timed_alone` and `timing_rechecked`, and keeps its verdicts: only its timings change. Rows are written back in
chunks (the shards' timed rows and the finished rounds' survivors), so a call cut short keeps what it timed.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from opgen.pipeline.report import kept_by_key
from opgen.pipeline.rundir import RunDir
from opgen.timing.guard import merge, suspicions

log = logging.getLogger("opgen.build")
CHUNK = 32   # rows timed before a chunk is written back (and the state saved)
QUIET_PASS_ENV = "OPGEN_QUIET_PASS"   # "1": run the pass, "0": never
# Whether the pass has run on a GPU: until it has, a build runs it only when QUIET_PASS_ENV asks (the 6,000-task
# build's calls do: scripts/gpu/dataset.sh)
VERIFIED_ON_CUDA = False


def enabled() -> bool:
    """Whether a CUDA build runs the quiet pass (QUIET_PASS_ENV, else whether it is verified on a GPU)."""
    setting = os.environ.get(QUIET_PASS_ENV)
    if setting in ("0", "1"):
        return setting == "1"
    return VERIFIED_ON_CUDA


def needs_quiet_pass(row: dict) -> bool:
    """Whether a timed row is timed again alone: timed (ok), not timed alone yet, and launch-bound by the guard's
    `host` rule, on its kept medians or on its first timing (`timing_rechecked` names it)."""
    if row.get("timed_alone") or row.get("timing_status") not in (None, "ok") or not row.get("eager_ms"):
        return False
    found = suspicions(row) + [str(row.get("timing_rechecked") or "")]
    return any(phrase.startswith("host:") or "host:" in phrase for phrase in found)


def rows_needing_it(rundir: RunDir) -> Iterator[tuple[Path, list[dict]]]:
    """(shard folder, its rows to time alone) for each timed shard whose window-kept rows need the pass."""
    for folder in sorted(rundir.root.glob("shards/*")):
        if rundir.done(folder, "timing") is None:
            continue
        kept = kept_by_key(rundir.rows(folder, "timed"), rundir.rows(folder, "timing"))
        rows = [row for row in kept if needs_quiet_pass(row)]
        if rows:
            yield folder, rows


def pass_workers() -> int:
    """Timing workers of the pass: they compile side by side, and each timed section pauses the others."""
    return max(1, min(8, (os.cpu_count() or 2) // 2))


def quiet_pass(rundir: RunDir, time_alone: Callable[[list[dict]], list[dict] | None],
               after_chunk: Callable[[], None] = lambda: None) -> dict:
    """Time alone every row of the run folder that needs it (`time_alone`: rows -> timed rows, None once stopped);
    write each chunk back and call `after_chunk` (a state save). Returns the tally: rows, changed, failed, seconds."""
    todo = [(folder, row) for folder, rows in rows_needing_it(rundir) for row in rows]
    tally = {"rows": len(todo), "changed": 0, "failed": 0, "seconds": 0.0}
    if not todo:
        return tally
    started = time.perf_counter()
    log.info("quiet pass: %d launch-bound row(s) to time again with nothing else running", len(todo))
    for start in range(0, len(todo), CHUNK):
        chunk = todo[start:start + CHUNK]
        timed = time_alone([row for _, row in chunk])
        if timed is None:
            break
        merged = {}
        for (folder, first), second in zip(chunk, timed):
            if second.get("timing_status") not in (None, "ok") or not second.get("eager_ms"):
                tally["failed"] += 1
                continue
            why = "; ".join(part for part in (first.get("timing_rechecked"), "timed alone (quiet pass)") if part)
            row = {**merge(first, second, why), "timed_alone": True}
            row["eager_ms_first"] = first.get("eager_ms_first") or first.get("eager_ms")
            tally["changed"] += row.get("eager_ms") != first.get("eager_ms")
            merged.setdefault(folder, {})[row["sample_index"]] = row
        write_back(rundir, merged)
        after_chunk()
        log.info("quiet pass: %d of %d rows timed, %.0f s", min(start + CHUNK, len(todo)), len(todo),
                 time.perf_counter() - started)
    tally["seconds"] = round(time.perf_counter() - started, 1)
    log.info("quiet pass: %d row(s) timed alone, %d got a faster median, %d failed to time, %.0f s", tally["rows"],
             tally["changed"], tally["failed"], tally["seconds"])
    return tally


def write_back(rundir: RunDir, merged: dict[Path, dict[int, dict]]) -> None:
    """The rows timed alone into their shards' timed rows and into the survivors of every finished round that holds
    them (a round's survivors are copies of its shards' rows), by `sample_index`."""
    by_index = {}
    for folder, rows in merged.items():
        rundir.write_rows(folder, "timed", [rows.get(row["sample_index"], row) for row in rundir.rows(folder, "timed")])
        by_index.update(rows)
    for folder in sorted(rundir.root.glob("rounds/*")):
        if rundir.done(folder, "round") is None:
            continue
        survivors = rundir.rows(folder, "survivors")
        if any(row.get("sample_index") in by_index for row in survivors):
            rundir.write_rows(folder, "survivors", [by_index.get(row.get("sample_index"), row) for row in survivors])
