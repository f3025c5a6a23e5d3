"""What a build's two GPU stages cost apart, on the build's own latest shards: the execute checks with no timed run
closing the GPU's lock, then the timing of those shards' tasks with no check beside it; and what a build that
alternated the two phases would make a minute, against the rate of the build as it streams them together.

    python scripts/analysis/phases.py builds/opgen-ops-6k/opgen-ops-6k.state [--candidates 100] [--tasks 60]
        [--workers 10] [--timing-workers 6] [--device-time]

The input is a build's state file or run folder. It takes the latest shards that were both executed and timed, until
they hold --candidates executed candidates. Their candidates go through the execute checks again in --workers
workers, under the build's settings. Then the latest --tasks of the rows they timed are timed again in one pool of
--timing-workers workers, under the build's timing options. Run it on the build's device, alone on the machine, from
the repository root (on a GPU machine after `source scripts/gpu/env.sh`). It prints one line for each phase, the
shards' own funnel, and the estimate:
tasks into the window a minute = 1 / (candidates a task / checks a minute + timed a task / timings a minute).
On a fresh machine the wall-clock figures include each worker's start-up and first compiles, as a build's first
minutes do; the timing line also gives the pace from the rows' own seconds, its workers' start-up left out. On CUDA
a line gives the checks' seconds holding the GPU's lock, by check: with --workers 1, each check's GPU work alone.
--device-time checks the candidates once more under torch's profiler and prints the device's own seconds on each
check beside its holds: how much of a hold is work on the GPU, not host work another holder could overlap, and how
much of that work is on float64 values (the comparisons of the outputs, as opposed to the task's own passes).
Exit 2 with one line for bad input or a machine fault.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from record_verdicts import Settings, per_candidate, run_checks  # noqa: E402

from opgen.analysis.run_source import run_folder  # noqa: E402
from opgen.errors import MachineFault, UsageError  # noqa: E402
from opgen.pipeline.rundir import RunDir  # noqa: E402

NAME = "phases"


@dataclass
class Sample:
    """The latest executed-and-timed shards: their executed candidates (records with code), their timed rows, and
    how many of those the window kept."""

    shards: list[str]
    candidates: list[dict]
    timed: list[dict]
    in_window: int


def latest_sample(run_dir: Path, candidates: int) -> Sample:
    """The latest shards with both their execute and their timing finished, enough to hold `candidates` executed
    candidates (whole shards, so the funnel is theirs), in the order they were timed."""
    run = RunDir(run_dir)
    folders = [folder for folder in run_dir.glob("shards/*")
               if run.done(folder, "execute") is not None and run.done(folder, "timing") is not None]
    # latest by when their timing finished (a state keeps the markers' times): shard numbers follow the plan, and a
    # build runs every source's needed shards before any source's margin
    folders.sort(key=lambda folder: ((folder / "timing.done").stat().st_mtime, folder.name))
    chosen: list[Path] = []
    executed = 0
    for folder in reversed(folders):
        if executed >= candidates:
            break
        chosen.insert(0, folder)
        executed += len(run.rows(folder, "execute"))
    records, timed, in_window = [], [], 0
    for folder in chosen:
        by_id = {record["id"]: record for record in run.rows(folder, "candidates")}
        records += [by_id[row["id"]] for row in run.rows(folder, "execute") if row["id"] in by_id]
        timed += run.rows(folder, "timed")
        in_window += sum(1 for verdict in run.rows(folder, "timing") if verdict.get("keep"))
    if not records or not in_window:
        raise UsageError(f"{run_dir} holds no shard both executed and timed with a task in its window")
    return Sample([folder.name for folder in chosen], records, timed, in_window)


def phased_rate(candidates_a_task: float, checks_a_minute: float, timed_a_task: float,
                timings_a_minute: float) -> float:
    """Tasks into the window a minute when the phases alternate: a task's share of each phase's minutes, summed."""
    return 1.0 / (candidates_a_task / checks_a_minute + timed_a_task / timings_a_minute)


def measure(sample: Sample, config: dict, tasks: int, workers: int, timing_workers: int,
            device_time: bool = False) -> list[str]:
    """Both phases, one after the other, and the lines that say what they cost (`device_time`: then the checks
    once more under torch's profiler, for their device seconds: `device_line`)."""
    from opgen.pipeline.preview import config_of
    from opgen.timing.driver import TimingOptions, time_records

    settings = Settings.of_build(config)
    started = time.perf_counter()
    lines = list(run_checks(sample.candidates, settings, workers).values())
    checks_s = time.perf_counter() - started
    worker_s, waited_s = per_candidate(lines)
    checks_a_minute = 60 * len(lines) / checks_s
    profiled = list(run_checks(sample.candidates, settings, workers, device_time=True).values()) if device_time else []

    rows = sample.timed[-tasks:]
    options = TimingOptions(**config_of(config).timing_options())
    started = time.perf_counter()
    timed = time_records(rows, options, workers_per_gpu=timing_workers, progress=False, guard=False)
    timing_s = time.perf_counter() - started
    held_s = sum(row.get("timed_s") or 0.0 for row in timed) / len(timed)
    timings_a_minute = 60 * len(timed) / timing_s
    steady = steady_pace(timed, timing_workers)

    candidates_a_task = len(sample.candidates) / sample.in_window
    timed_a_task = len(sample.timed) / sample.in_window
    ceiling = 60 / (held_s * timed_a_task) if held_s else None
    rate = phased_rate(candidates_a_task, checks_a_minute, timed_a_task, timings_a_minute)
    warm_rate = phased_rate(candidates_a_task, checks_a_minute, timed_a_task, steady) if steady else None
    return [
        f"{NAME}: {len(sample.shards)} shards ({sample.shards[0]} to {sample.shards[-1]}): "
        f"{len(sample.candidates)} candidates executed, {len(sample.timed)} timed, {sample.in_window} into the "
        f"window: {candidates_a_task:.2f} candidates and {timed_a_task:.2f} timings a task",
        f"{NAME}: the checks alone: {len(lines)} candidates in {checks_s:.1f} s with {workers} workers, "
        f"{checks_a_minute:.1f} a minute; worker-seconds a candidate {worker_s:.2f}, {waited_s:.2f} of them waiting "
        "for the GPU's lock",
        *held_line(lines),
        *(device_line(profiled, lines) if device_time else []),
        f"{NAME}: the timing alone: {len(timed)} tasks in {timing_s:.1f} s with {timing_workers} workers, "
        f"{timings_a_minute:.1f} a minute"
        + (f" ({steady:.1f} with its workers started: the rows' own seconds)" if steady else "")
        + f"; exclusive hold {held_s:.3f} s a task"
        + (f" (a ceiling of {ceiling:.1f} tasks into the window a minute)" if ceiling else ""),
        f"{NAME}: the two phases one after the other: {rate:.1f} tasks into the window a minute"
        + (f", {rate / ceiling:.0%} of the ceiling" if ceiling else "")
        + (f"; {warm_rate:.1f} with the timing workers started" if warm_rate else "")
        + (f", {warm_rate / ceiling:.0%}" if warm_rate and ceiling else ""),
    ]


def held_line(lines: list[dict]) -> list[str]:
    """The checks' holds of the GPU's lock a candidate, in all and by check (none on the CPU): with --workers 1,
    each check's GPU time with nothing beside it, which is what a timed run's closed lock leaves the checks."""
    from opgen.analysis.run_profile import held_by_check

    by_check = held_by_check(lines)
    if not by_check:
        return []
    held = sum(line.get("worker_lock_held_s") or 0.0 for line in lines) / len(lines)
    return [f"{NAME}: the checks held the GPU's lock {held:.3f} s a candidate; by check: "
            + ", ".join(f"{name} {seconds:.3f} s" for name, seconds in by_check.items())]


def device_line(profiled: list[dict], plain: list[dict]) -> list[str]:
    """The device's own seconds on the checks a candidate (a second pass of them under torch's profiler, which
    slows them), by check, each beside its seconds holding the GPU's lock in the plain pass (on CUDA): with
    --workers 1, how much of a check's holds is work on the GPU, which no timed run's exclusive hold can overlap."""
    from opgen.analysis.run_profile import by_check, held_by_check

    device = by_check(profiled, "worker_device_s_by_check")
    if not device:
        return [f"{NAME}: the profiler gave no device seconds for the checks"]
    float64 = by_check(profiled, "worker_float64_device_s_by_check")
    held = held_by_check(plain)
    total, held_total = sum(device.values()), sum(held.values())
    return [f"{NAME}: the device's own seconds on the checks (torch's profiler) {total:.3f} s a candidate"
            + (f", {total / held_total:.0%} of their holds of the GPU's lock" if held_total else "")
            + f", {sum(float64.values()):.3f} s of them on float64 values (the comparisons); by check: "
            + ", ".join(f"{name} {seconds:.3f} s ({float64.get(name, 0.0):.3f} float64)"
                        + (f" of {held[name]:.3f} held" if name in held else "") for name, seconds in device.items())]


def steady_pace(timed: list[dict], workers: int) -> float | None:
    """Timings a minute once the pool's workers have started: `workers` at once, each row taking its own
    `timing_wall_s`. A fresh pool's wall clock also holds every worker's start-up (its imports and CUDA set-up),
    which a build pays once a call, not once a phase."""
    seconds = [row["timing_wall_s"] for row in timed if row.get("timing_wall_s")]
    return 60 * workers * len(seconds) / sum(seconds) if seconds else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", help="a build's state file or run folder")
    parser.add_argument("--candidates", type=int, default=100, help="executed candidates to check again (whole shards)")
    parser.add_argument("--tasks", type=int, default=60, help="the latest timed rows of those shards to time again")
    parser.add_argument("--workers", type=int, default=10,
                        help="execute check workers (the build's default on 16 cores)")
    parser.add_argument("--timing-workers", type=int, default=6, help="timing workers on the GPU")
    parser.add_argument("--device-time", action="store_true",
                        help="check the candidates once more under torch's profiler: each check's device seconds")
    args = parser.parse_args(argv)
    try:
        if min(args.candidates, args.tasks, args.workers, args.timing_workers) < 1:
            raise UsageError("--candidates, --tasks, --workers and --timing-workers must be at least 1")
        with tempfile.TemporaryDirectory(prefix="opgen-phases-") as scratch:
            run_dir = run_folder(Path(args.build), Path(scratch))
            config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
            if config.get("device") != "cuda" and not config.get("cpu_timing"):
                raise UsageError(f"{args.build}: the build timed nothing (a CPU build without --cpu-timing)")
            sample = latest_sample(run_dir, args.candidates)
            if config.get("device") == "cuda":
                from opgen.sandbox.gpus import visible_gpus

                if not visible_gpus():
                    raise UsageError(f"{args.build} was built on CUDA and no CUDA device is visible here: run this "
                                     "on a GPU machine of the build's model")
            lines = measure(sample, config, args.tasks, args.workers, args.timing_workers, args.device_time)
    except (UsageError, MachineFault) as error:
        print(f"{NAME}: {error}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
