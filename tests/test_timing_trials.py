"""Adaptive trials: the median's confidence interval, when a plan stops, and the trial loop on a real callable."""

from __future__ import annotations

import random

import pytest
import torch

from opgen.timing.trials import TrialPlan, median_ci, summarize, trial_times_ms


def test_median_ci_uses_the_binomial_order_statistics():
    samples = list(range(1, 21))            # n = 20: ranks 5 and 16 (1-based)
    assert median_ci(samples) == (5, 16)
    assert median_ci(list(range(1, 11))) == (1, 10)   # n = 10: the extremes
    low, high = median_ci(random.Random(0).sample(range(1000), 400))
    assert 400 < low < 500 < high < 600


def test_adaptive_plan_stops_at_the_minimum_on_stable_samples():
    plan = TrialPlan(max_trials=100, min_trials=10)
    stable = [5.0 + 0.001 * (i % 3) for i in range(10)]
    assert not plan.done(stable[:9]) and plan.done(stable)


def test_adaptive_plan_keeps_going_on_noisy_samples_until_the_cap():
    rng = random.Random(1)
    noisy = [rng.uniform(4.0, 6.0) for _ in range(99)]
    plan = TrialPlan(max_trials=100, min_trials=10)
    assert not plan.done(noisy) and plan.done([*noisy, 5.0])


def test_fixed_plan_runs_exactly_the_cap():
    plan = TrialPlan(max_trials=30, mode="fixed")
    assert not plan.done([1.0] * 29) and plan.done([1.0] * 30)
    with pytest.raises(ValueError):
        TrialPlan(mode="sometimes")


def test_trial_loop_calls_warmups_then_trials_until_the_plan_is_done():
    calls = []

    def fn(x):
        calls.append(1)
        return x * 2

    samples = trial_times_ms(torch, fn, [torch.ones(4)], "cpu", TrialPlan(warmups=3, max_trials=12, mode="fixed"))
    assert len(samples) == 12 and len(calls) == 15 and all(s >= 0 for s in samples)
    stats = summarize(samples)
    assert stats["count"] == 12 and stats["min"] <= stats["median"] <= stats["max"]



def test_profiler_keeps_the_cuda_agent_protocol_of_5_warmups_and_10_iterations():
    from opgen.timing.trials import PROFILER_ITERS, PROFILER_WARMUPS, profiler_time_us

    calls = []

    def fn(x):
        calls.append(1)
        return torch.tanh(x)

    assert profiler_time_us(torch, fn, [torch.ones(64)], "cpu") > 0
    assert (PROFILER_WARMUPS, PROFILER_ITERS) == (5, 10) and len(calls) == 15


def test_each_cuda_trial_waits_for_the_l2_flush_before_its_start_event(monkeypatch):
    """The order of one CUDA trial, on a stand-in for torch.cuda: flush, wait, start, call, end, wait. Without the
    first wait the call races the flush, and compiled medians moved 2.6% between runs on the H200 (1.7% with it)."""
    from types import SimpleNamespace

    from opgen.timing import trials
    from opgen.timing.provenance import method_note

    calls: list[str] = []

    class Event:
        def __init__(self, enable_timing: bool):
            self.name = "start" if not any(c.startswith("event") for c in calls) else "end"
            calls.append("event")

        def record(self):
            calls.append(f"record {self.name}")

        def elapsed_time(self, other) -> float:
            return 1.0

    fake = SimpleNamespace(cuda=SimpleNamespace(Event=Event, synchronize=lambda: calls.append("wait"),
                                                is_initialized=lambda: True))
    monkeypatch.setitem(trials._FLUSH, "buffer", SimpleNamespace(zero_=lambda: calls.append("flush")))
    samples = trials.trial_times_ms(fake, lambda: calls.append("call"), [], "cuda",
                                    TrialPlan(warmups=0, max_trials=2, min_trials=2, mode="fixed"))
    assert samples == [1.0, 1.0]
    trial = ["flush", "wait", "record start", "call", "record end", "wait"]
    assert calls[calls.index("flush"):] == trial * 2
    note = method_note("cuda", TrialPlan(), 256 * 2**20)
    assert "L2 flushed before each trial by writing 256 MiB and waited for" in note
