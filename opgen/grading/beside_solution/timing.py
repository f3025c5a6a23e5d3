"""Timed calls of a solution and of the reference, with the dataset's protocol (opgen/timing/trials.py: warm-ups,
then CUDA events with the L2 flushed before each trial, or the host clock on the CPU, stopping once the median is
known to ±1%), and two changes for an untrusted callable, made for the reference alike:

- the whole device is synchronised before the end event is recorded, so work a solution leaves running on another
  stream, or outputs not ready when it returns, count in its time (the dataset's own timings wait only for the
  current stream; the synchronisation adds the same few microseconds to solution and reference);
- the clock's functions (`time.perf_counter`, `torch.cuda.synchronize`, the CUDA event's `record` and
  `elapsed_time`) are the ones this module captured when it was imported, before any solution loaded, so patching
  them changes nothing here (the guard reports the patch).

- with `refill`, every trial runs on inputs of its own: `refill(trial)` writes a fresh draw's values into the input
  tensors before the trial (outside the timed region, before the L2 flush), so a solution that caches its output
  by a fingerprint of the input values (a hash, a sum) must compute each trial's for real.

The last timed call's output is kept, with the trial it came from, to be checked against the reference's on that
trial's inputs; with `keep`, so is a copy of one more trial's, chosen at random among the others (each one's chance
the same, drawn once the trial has returned and is known not to be the last): a solution honest only when checked
(on the last trial, say, which it can tell by counting) is caught on any other."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from opgen.timing.trials import TrialPlan, flush_buffer, summarize

_PERF_COUNTER = time.perf_counter
_SYNCHRONIZE = torch.cuda.synchronize
_EVENT = torch.cuda.Event
_RECORD = torch.cuda.Event.record
_ELAPSED = torch.cuda.Event.elapsed_time
_ZERO = torch.Tensor.zero_
_RANDBELOW = secrets.randbelow


@dataclass
class Timed:
    """The trial times of one callable (ms), the output of its last call, and that call's trial (-1: a warm-up)."""

    samples: list[float]
    output: object
    last_trial: int = -1
    kept: object = None      # keep(output) of the trial chosen at random
    kept_trial: int = -1

    def stats(self) -> dict:
        return summarize(self.samples)


def timed_calls(fn: Callable, inputs: list, device: str, plan: TrialPlan,
                refill: Callable[[int], None] | None = None, keep: Callable[[object], object] | None = None) -> Timed:
    """`plan.warmups` untimed calls, then trials until `plan.done`, each on a fresh draw when `refill` is given; see
    the module docstring."""
    cuda = device == "cuda"
    output = kept = None
    kept_trial = -1
    with torch.no_grad():
        for _ in range(plan.warmups):
            output = fn(*inputs)
        if cuda:
            _SYNCHRONIZE()
        samples: list[float] = []
        flush = flush_buffer(torch) if cuda else None
        start, end = (_EVENT(enable_timing=True), _EVENT(enable_timing=True)) if cuda else (None, None)
        done = plan.done(samples)
        while not done:
            output = None
            if refill is not None:
                refill(len(samples))
            if cuda:
                _ZERO(flush)
                _SYNCHRONIZE()
                _RECORD(start)
                output = fn(*inputs)
                _SYNCHRONIZE()   # every stream: a solution's side-stream work counts
                _RECORD(end)
                _SYNCHRONIZE()
                samples.append(_ELAPSED(start, end))
            else:
                started = _PERF_COUNTER()
                output = fn(*inputs)
                samples.append((_PERF_COUNTER() - started) * 1e3)
            done = plan.done(samples)
            # reservoir sampling over the trials known not to be the last (checked anyway): each alike
            if not done and keep is not None and _RANDBELOW(len(samples)) == 0:
                kept, kept_trial = None, len(samples) - 1
                kept = keep(output)
    return Timed(samples, output, len(samples) - 1 if samples else -1, kept, kept_trial)
