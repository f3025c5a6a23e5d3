"""`opgen profile`'s figures as a person reads them: a short summary of what the build made and where its time went
(`--json` gives every figure)."""

from __future__ import annotations

from opgen.outcome import outcome_line


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} s"


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _counts(counts: dict) -> str:
    return ", ".join(f"{name} {count}" for name, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def execute_lines(execute: dict, timed: bool) -> list[str]:
    """The execute stage: how many ran and passed, its workers, each check's seconds, memory."""
    waiting = f" ({execute['passed_not_yet_timed']} not timed yet)" if timed and execute["passed_not_yet_timed"] else ""
    lines = [f"execute: {execute['candidates']:,} candidates run in the sandbox, {execute['passed']:,} passed{waiting}"]
    if execute.get("worker_processes"):
        lines.append(f"  {execute['worker_processes']} worker processes; a worker's first candidate "
                     f"{_seconds(execute['first_task_worker_s_mean'])}, each later one "
                     f"{_seconds(execute['later_task_worker_s_mean'])} (mean)")
    checks = sorted(execute["check_s_per_candidate_seen"].items(), key=lambda kv: -kv[1])
    if checks:
        lines.append("  seconds a candidate, slowest check first: "
                     + ", ".join(f"{name} {seconds:.3g}" for name, seconds in checks))
    lock = f", waiting for the GPU's lock {_share(execute['lock_wait_share'])}" if timed else ""
    lines.append(f"  workers' CPU share {_share(execute['cpu_share'])}{lock}")
    holds = execute.get("lock_holds") or {}
    if holds:
        longest = holds["longest_hold_s"]
        lines.append(f"  the GPU's lock: {holds['holds_per_candidate']} holds a candidate, {_share(holds['waited_share'])} "
                     f"of them waited ({_seconds(holds['wait_s_per_waited_hold'])} each), held "
                     f"{_share(holds['held_share'])} of the time; a candidate's longest hold median "
                     f"{_seconds(longest['median'])}, 90th percentile {_seconds(longest['p90'])}")
        if holds.get("longest_hold_check"):
            lines.append("    the check that took it: " + ", ".join(
                f"{name} {_share(share)}" for name, share in holds["longest_hold_check"].items()))
        if holds.get("held_s_by_check"):
            lines.append("    held a candidate, by check: " + ", ".join(
                f"{name} {_seconds(seconds)}" for name, seconds in holds["held_s_by_check"].items()))
    bands = execute.get("lock_wait_by_eager_ms") or {}
    if bands:
        lines.append("  lock wait a candidate by its shared-GPU eager median: " + ", ".join(
            f"{name} ms {_seconds(band['lock_wait_s_mean'])} ({band['candidates']})" for name, band in bands.items()
            if name != "none"))
    alone = execute.get("measured_alone") or {}
    if alone:
        ratio = alone["shared_over_alone"]
        lines.append(f"  measured again alone (read too slow beside the others): {alone['candidates']}, the shared "
                     f"reading {ratio['median']:.3g}x the alone one (median; {ratio['min']:.3g}-{ratio['max']:.3g}x)")
    if execute["out_of_memory"] or execute["memory_retry"]:
        lost = execute.get("memory_retry_lost_s")
        lines.append(f"  rejected out of GPU memory, by check: {_counts(execute['out_of_memory']) or 'none'}; tried "
                     f"again after running short: {_counts(execute['memory_retry']) or 'none'}"
                     + (f", their short tries {lost:,.0f} worker-s" if lost else ""))
    if execute.get("gpu_cache_releases_per_candidate"):
        lines.append(f"  GPU cache given back to a device short of memory: {execute['gpu_cache_releases_per_candidate']}"
                     " holds a candidate")
    peak = execute.get("gpu_peak_mb") or {}
    if peak:
        lines.append(f"  GPU memory a candidate's checks held at most: median {peak['median']:,} MB, 90th percentile "
                     f"{peak['p90']:,} MB, largest {peak['max']:,} MB")
    return lines


def timing_lines(timing: dict, window: dict) -> list[str]:
    """The timing stage: tasks timed and in the window, a task's seconds, the window's rejections."""
    lines = [f"timing: {timing['tasks']:,} tasks timed, {timing['in_window']:,} in the window "
             f"({window['below']:,} below it, {window['above']:,} above it)"]
    if timing["tasks"]:
        lines.append(f"  a task (mean): {_seconds(timing['timing_wall_s_mean'])} in all, of which waiting for the "
                     f"GPU's lock {_seconds(timing['lock_wait_s_mean'])}, holding it alone "
                     f"{_seconds(timing['timed_s_mean'])}; compile {_seconds(timing['compile_s_mean'])}")
        if timing.get("lock_gate_wait_s_mean") is not None:
            lines.append(f"  of the wait for the lock, {_seconds(timing['lock_gate_wait_s_mean'])} behind other "
                         "exclusive holds, the rest for the shared holders to leave")
        if timing.get("memory_retries") or timing.get("out_of_memory"):
            lines.append(f"  timed again after running short of GPU memory: {timing.get('memory_retries', 0):,} "
                         f"({timing.get('memory_waited_out', 0):,} of them waited out the minute's bound for it, "
                         f"{timing.get('memory_wait_s', 0):,.0f} s of waiting in all); failed for GPU memory: "
                         f"{timing['out_of_memory']:,}")
        if timing["in_window_per_min_ceiling"] is not None:
            lines.append(f"  the exclusive holds alone allow {timing['in_window_per_min_ceiling']} tasks into the "
                         "window a minute per GPU")
    return lines


def profile_summary(figures: dict, run: str) -> str:
    """The summary `opgen profile RUN` prints."""
    lines = [f"{run}: {figures['rates']['wall_s']:,} s of build time"]
    counts = figures.get("outcome")
    lines.append(outcome_line(counts) if counts else
                 "outcome: not written yet (a build writes it as a call ends; the build's --save-state file gives "
                 "it for a build under way)")
    timed = figures["timed"]
    lines += ["", *execute_lines(figures["execute"], timed)]
    if timed:
        lines += timing_lines(figures["timing"], figures["window"])
    rates = figures["rates"]
    per_min = [f"{rates['executed_per_min']} run", f"{rates['passed_per_min']} passed"]
    if timed:
        per_min += [f"{rates['timed_per_min']} timed", f"{rates['in_window_per_min']} into the window"]
    lines.append("a minute: " + ", ".join(per_min) + " candidates")
    if timed and rates.get("lock_closed_share") is not None and rates.get("ceiling_share") is not None:
        waited = rates.get("checks_lock_wait_share")
        lines.append(f"what bounds it: the timed runs kept the GPU's lock closed {_share(rates['lock_closed_share'])} "
                     "of the time (a timed task's wait for its exclusive hold and the hold)"
                     + (f", the check workers waited for it {_share(waited)} of theirs" if waited is not None else "")
                     + f"; into the window at {_share(rates['ceiling_share'])} of the ceiling")
    compare = figures.get("compare")
    if compare is not None:
        lines.append(f"\ncompared with the other run, on the {compare['tasks']:,} tasks both timed (mean here / "
                     "there, median ratio):")
        for key, values in compare.items():
            if isinstance(values, dict):
                lines.append(f"  {key}: {values['this']} / {values['other']}, {values['median_ratio']}")
    return "\n".join(lines)
