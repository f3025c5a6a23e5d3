"""The sandbox entry point that describes a task before any solution exists: `describe_in_worker`, the task loaded
and its input configurations derived exactly as a grade does, then each one's shapes read on the meta device."""

from __future__ import annotations

import torch

from opgen.grading.beside_solution.configs import draw_config
from opgen.grading.beside_solution.worker import Grading, Verdict
from opgen.sandbox.task import build_model, flatten_output


def describe_in_worker(payload: dict) -> dict:
    """In the sandbox worker: the task loaded and its configurations derived exactly as a grade does, then each one's
    shapes read on the meta device (no memory, no kernels)."""
    grading = Grading(payload)
    try:
        grading.load_task()
        if payload.get("derive_sizes"):
            grading.derive_held_out()
    except Verdict as verdict:
        return {"error": verdict.detail}
    try:
        meta_model = build_model(grading.namespace, "meta", grading.seed)
    except Exception:  # noqa: BLE001 - a model the meta device cannot hold: no output shapes
        meta_model = None
    configs = []
    for config in grading.configs:
        inputs = draw_config(grading.namespace, config, "meta", grading.seed, 0)
        outputs = None
        if meta_model is not None:
            try:
                with torch.no_grad():
                    outputs = [_describe(t) for t in flatten_output(meta_model(*inputs))]
            except Exception:  # noqa: BLE001 - an operator the meta device lacks: the shapes stay unknown
                outputs = None
        configs.append({"name": config.name, "sizes": dict(config.spec or {}),
                        "inputs": [_describe(x) for x in inputs], "outputs": outputs})
    return {"atol": grading.atol, "rtol": grading.rtol, "configs": configs,
            "held_out_sizes": [c["sizes"] for c in configs[1:]], "held_out_note": grading.result.get("held_out_note")}


def _describe(value) -> dict:
    if isinstance(value, torch.Tensor):
        return {"shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch.")}
    return {"value": repr(value)}
