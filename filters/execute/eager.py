"""Execute filter `exec_error` (and run-time `invalid_task` / `stochastic_op`): build the model and run forward once."""

from __future__ import annotations

import torch

from filters.base import Filter, Verdict
from filters.execute.census import OpCensus
from filters.execute.task_run import TaskRun
from filters.execute.tensors import shapes
from opgen.sandbox.task import build_model, draw_inputs, load_namespace

DROPOUT_TYPES = (torch.nn.Dropout, torch.nn.Dropout1d, torch.nn.Dropout2d, torch.nn.Dropout3d, torch.nn.AlphaDropout,
                 torch.nn.FeatureAlphaDropout)
STOCHASTIC_TYPES = (torch.nn.RReLU, torch.nn.FractionalMaxPool2d, torch.nn.FractionalMaxPool3d)


def stochastic_submodule(model: torch.nn.Module) -> str | None:
    for name, module in model.named_modules():
        if isinstance(module, STOCHASTIC_TYPES) or (isinstance(module, DROPOUT_TYPES) and module.p > 0):
            return f"{name or 'model'}: {type(module).__name__}" + (f"(p={module.p})" if hasattr(module, "p") else "")
    return None


def rng_states(device: str) -> list[torch.Tensor]:
    """The generator states a random draw would advance (a seeded op with p=0 dropout does not)."""
    states = [torch.get_rng_state()]
    if device.startswith("cuda"):
        states.append(torch.cuda.get_rng_state())
    return states


class EagerCheck(Filter):
    """Loads the task, builds the model, runs forward on input draw 0 and watches for random draws."""

    name = "eager"
    holds_gpu_lock_itself = True   # builds the weights on the host first
    writes = ("namespace", "model", "inputs", "outputs", "work_ops")

    def filter(self, run: TaskRun) -> Verdict:
        run.namespace = load_namespace(run.code, run.name)
        model = build_model(run.namespace, "cpu", run.seed)  # the same weights; built on the host, unlocked
        module = stochastic_submodule(model)
        if module:
            return Verdict.reject("stochastic_op", f"stochastic module {module}")
        census = OpCensus()
        with run.sharing_gpu():
            run.model = model.to(run.device)
            inputs = draw_inputs(run.namespace, run.device, run.draw_seed(0))
            rng_before = rng_states(run.device)
            with census:
                outputs = run.forward(run.model, inputs)
            random_draws = not all(torch.equal(a, b) for a, b in zip(rng_before, rng_states(run.device)))
        if random_draws:
            ops = ", ".join(sorted(set(census.random_ops))) or "unknown op"
            return Verdict.reject("stochastic_op", f"forward drew random numbers ({ops})")
        run.inputs, run.outputs, run.work_ops = inputs, [outputs], census.work_ops
        output_shapes = shapes(outputs)
        return Verdict.ok(output_shape=output_shapes[0] if len(output_shapes) == 1 else output_shapes,
                          work_ops=census.work_ops)
