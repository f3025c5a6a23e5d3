"""CUDA-Agent's milestone reward of a grade: -1 incorrect, 1 correct, 2 faster than eager by more than 5%, 3 faster
than both eager and torch.compile by more than 5% (the solution's time below 95% of the baseline's)."""

from __future__ import annotations

# A baseline is beaten when the solution takes less than this share of its time (more than 5% faster).
BEATS_BASELINE = 0.95


def beats(speedup: float | None) -> bool:
    """Whether a speed-up (baseline time / solution time) means the solution took under 95% of the baseline's time."""
    return speedup is not None and speedup > 0 and 1.0 / speedup < BEATS_BASELINE


def milestone_reward(grade: dict) -> float:
    """-1, 1, 2 or 3 for a grade (`correct`, `speedup_eager`, `speedup_compile`); an untimed correct grade is 1, and
    one timed without the compile baseline reaches 2 at most."""
    if not grade.get("correct"):
        return -1.0
    if not beats(grade.get("speedup_eager")):
        return 1.0
    return 3.0 if beats(grade.get("speedup_compile")) else 2.0


def milestone_text(reward: float) -> str:
    """What a milestone reward means, in words."""
    return {-1.0: "incorrect", 1.0: "correct", 2.0: "correct and faster than eager by more than 5%",
            3.0: "correct and faster than eager and torch.compile by more than 5%"}.get(float(reward), "unknown")
