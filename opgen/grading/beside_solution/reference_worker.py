"""The sandbox entry point that times a task's reference apart from any solution: `time_reference_in_worker`, run
only in workers that never load solution code, each keeping its last tasks' built and compiled references warm."""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable

import torch

from opgen.grading.beside_solution.figures import reference_figures
from opgen.grading.beside_solution.guard import Settings
from opgen.grading.beside_solution.worker import Grading, Verdict, timing_draws
from opgen.sandbox.gpus import gpu_lock
from opgen.sandbox.task import describe
from opgen.sandbox.torch_state import isolated_torch_state

_PERF_COUNTER = time.perf_counter
WARM_TASKS = 4   # built and compiled references kept per worker (the most recently timed tasks)
_WARM: OrderedDict[tuple, tuple[Grading, Callable | None]] = OrderedDict()


def warm_key(payload: dict) -> tuple:
    """What the built and compiled reference depend on: the task's code, the device, the weights' seed, the compile
    baseline's warm-up draw and the timed configuration."""
    return (hashlib.sha256(payload["task"].encode()).hexdigest(), payload["device"], int(payload["seed"]),
            int(payload["draws"]), json.dumps(payload["configs"][0], sort_keys=True),
            bool(payload.get("compile_baseline")))


def time_reference_in_worker(payload: dict) -> dict:
    """The reference's timing figures (payload: task, device, seed, draws, configs (the first is timed), warmups,
    trials, min_trials, compile_baseline, threads), on the draws a grade's timing uses: {"ok": True, eager_ms, ...}
    or {"ok": False, "reason", "detail"}."""
    started = _PERF_COUNTER()
    if payload.get("threads"):
        torch.set_num_threads(int(payload["threads"]))
    key = warm_key(payload)
    warm = key in _WARM
    with isolated_torch_state(reset_compiled=False):   # the compiled reference stays compiled for the next call
        try:
            grading, compiled = _reference(key, payload)
            plan = grading.trial_plan()
            grading.settings.restore()
            with gpu_lock(grading.lock):
                eager, compile_stats = grading.reference_times(grading.configs[0], compiled, plan)
        except Verdict as verdict:
            _WARM.pop(key, None)
            return {"ok": False, "reason": verdict.reason, "detail": verdict.detail[:2000]}
        except Exception as error:  # noqa: BLE001 - the task failed while timed: no figures
            _WARM.pop(key, None)
            return {"ok": False, "reason": "reference_error", "detail": f"the task fails while timed: {describe(error)}"}
    _WARM[key] = (grading, compiled)
    _WARM.move_to_end(key)
    while len(_WARM) > WARM_TASKS:
        _WARM.popitem(last=False)
    figures = reference_figures(eager, compile_stats, grading.result.get("compile_error"))
    return {"ok": True, **figures, "warm": warm, "worker_s": round(_PERF_COUNTER() - started, 3),
            **({"hardware": torch.cuda.get_device_properties(0).name} if grading.device == "cuda" else {})}


def _reference(key: tuple, payload: dict) -> tuple[Grading, Callable | None]:
    """The task's built (and, with the compile baseline, compiled) reference: kept warm, or made now."""
    if key in _WARM:
        grading, compiled = _WARM[key]
        grading.payload = payload   # this call's trial plan
        return grading, compiled
    grading = Grading(payload)
    grading.settings = Settings(grading.strict)
    grading.load_task()
    _, _, compile_draw, _ = timing_draws(grading.draws)
    compiled = grading.compile_reference(grading.configs[0], compile_draw) if payload.get("compile_baseline") else None
    return grading, compiled
