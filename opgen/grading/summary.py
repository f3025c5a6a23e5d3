"""The figures of a set of grades, as CUDA-Agent and KernelBench report them: pass rate, shares faster than eager and
than torch.compile, geometric-mean speed-ups, fast_p."""

from __future__ import annotations

import math
import statistics
from collections import Counter

from opgen.grading.milestones import milestone_reward

FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
BASELINES = ("eager", "compile")


def geometric_mean(values: list[float]) -> float | None:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def summarize_grades(lines: list[dict], tasks: int) -> dict:
    """Figures over the dataset's `tasks` (a task with no solution counts as not correct and not faster), except the
    geometric means and medians, which are over the correct solutions with a speed-up (CUDA-Agent's figure is over
    the tasks its solutions passed)."""
    correct = [line for line in lines if line.get("correct")]
    figures: dict = {
        "tasks": tasks, "attempted": len(lines), "not_attempted": tasks - len(lines), "correct": len(correct),
        "pass_rate": _share(len(correct), tasks),
        "pass_rate_attempted": _share(len(correct), len(lines)),
        "reasons": dict(Counter(line.get("reason") for line in lines).most_common()),
        # CUDA-Agent's milestone reward, a task with no solution counting as incorrect (-1)
        "mean_reward": (sum(_reward(line) for line in lines) - (tasks - len(lines))) / tasks if tasks else None,
        "rewards": dict(sorted(Counter(f"{_reward(line):g}" for line in lines).items())),
    }
    for baseline in BASELINES:
        speedups = [line[f"speedup_{baseline}"] for line in correct if line.get(f"speedup_{baseline}")]
        timed = bool(speedups)
        figures[f"faster_than_{baseline}"] = _share(sum(s > 1.0 for s in speedups), tasks) if timed else None
        figures[f"geomean_speedup_{baseline}"] = geometric_mean(speedups)
        figures[f"median_speedup_{baseline}"] = statistics.median(speedups) if timed else None
        figures[f"speedups_{baseline}"] = len(speedups)
        figures[f"fast_p_{baseline}"] = {
            f"{p:g}": (_share(len(correct), tasks) if p == 0.0 else
                       _share(sum(s > p for s in speedups), tasks) if timed else None) for p in FAST_P}
    return figures


def _reward(line: dict) -> float:
    return line["reward"] if line.get("reward") is not None else milestone_reward(line)


def _share(count: int, total: int) -> float | None:
    return count / total if total else None


def summary_text(figures: dict) -> str:
    """The summary in a few lines, for the terminal."""
    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.1%}"

    def times(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3f}x"

    lines = [f"{figures['tasks']} tasks: {figures['attempted']} attempted, {figures['not_attempted']} not attempted "
             f"(no solution file: counted as not correct); {figures['correct']} correct",
             f"pass rate {pct(figures['pass_rate'])} of all tasks ({pct(figures['pass_rate_attempted'])} of those "
             f"attempted); reasons: {', '.join(f'{k} {v}' for k, v in figures['reasons'].items())}"]
    if figures.get("mean_reward") is not None:
        counts = ", ".join(f"{count} x {reward}" for reward, count in figures["rewards"].items())
        lines.append(f"milestone reward (-1, 1, 2, 3): mean {figures['mean_reward']:.3f} over all tasks ({counts})")
    for baseline in BASELINES:
        fast = ", ".join(f"fast_{p} {pct(v)}" for p, v in figures[f"fast_p_{baseline}"].items())
        lines.append(f"vs {baseline}: faster {pct(figures[f'faster_than_{baseline}'])} of all tasks; geomean "
                     f"{times(figures[f'geomean_speedup_{baseline}'])}, median "
                     f"{times(figures[f'median_speedup_{baseline}'])} over the {figures[f'speedups_{baseline}']} "
                     f"correct timed solutions; {fast}")
    if figures.get("seconds_per_task") is not None:
        lines.append(f"{figures['graded_now']} graded in {figures['wall_s']:.0f} s: "
                     f"{figures['seconds_per_task']:.2f} s per graded task")
    return "\n".join(lines)
