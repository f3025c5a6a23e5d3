"""The grade's own state, which the solution's code shares a process with: what the verdict is computed from (the
tolerance, the seed, the draws, the configurations, the payload, the result so far, the settings the reference runs
under, the reference model and its weights, the task module's names), and what runs beside the grader (threads,
timers, handlers), recorded before each stretch of the solution's code and compared after it. None of it changes
while only the solution runs, so a change there is the solution's, made through a route into the grader's objects
that opgen/grading/beside_solution/introspection.py did not refuse."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import torch

from opgen.grading.beside_solution.compare import same_bits
from opgen.grading.beside_solution.introspection import SOLUTION_FILENAME
from opgen.grading.beside_solution.leftovers import Baseline

# The Grading attributes a verdict depends on; `result` and the reference are compared apart.
FIELDS = ("payload", "device", "seed", "draws", "configs", "atol", "rtol", "lock", "namespace", "reference", "settings",
          "guard", "guard_problem", "watch_problem", "snapshot_changes")


def _weights(model: object) -> list[tuple]:
    """What an honest call leaves alone in a model: each parameter and buffer's tensor, storage, shape, dtype, and
    (parameters) its version counter, which every in-place write moves."""
    if not isinstance(model, torch.nn.Module):
        return []
    entries = []
    for kind, named in (("parameter", model.named_parameters()), ("buffer", model.named_buffers())):
        for name, tensor in named:
            version = tensor._version if kind == "parameter" else None
            entries.append((kind, name, id(tensor), tensor.data_ptr(), tuple(tensor.shape), tensor.dtype, version))
    return entries


def _tensors(model: object) -> list[torch.Tensor]:
    if not isinstance(model, torch.nn.Module):
        return []
    return [tensor.detach() for tensor in (*model.parameters(), *model.buffers())]


def _task_functions(namespace: object) -> dict[str, tuple]:
    """The task module's names as loaded (its functions and classes with their code objects: a swapped `__code__`
    runs other code under the same function; its sizes, which `get_inputs` reads); compared by identity."""
    if not isinstance(namespace, dict):
        return {}
    return {name: (value, getattr(value, "__code__", None), getattr(value, "__defaults__", None))
            for name, value in namespace.items()}


def _module_state(model: object) -> list[tuple]:
    """Each of the reference's modules: its class, the names set on it (an instance `forward` hides the class's)
    and how many hooks of each kind it holds (a forward hook rewrites its output)."""
    if not isinstance(model, torch.nn.Module):
        return []
    return [(path, type(module), tuple(sorted(vars(module))),
             tuple(len(value) for key, value in sorted(vars(module).items())
                   if "hook" in key and hasattr(value, "__len__")))
            for path, module in model.named_modules(remove_duplicate=False)]


def _task_classes(namespace: object) -> dict[str, dict]:
    """The task module's own classes (the reference's `Model`), each with its attributes, compared by identity: a
    method set on the class runs for the reference."""
    if not isinstance(namespace, dict):
        return {}
    own = namespace.get("__name__")
    return {name: dict(vars(value)) for name, value in namespace.items()
            if isinstance(value, type) and value.__module__ == own}


def _same_classes(now: dict[str, dict], then: dict[str, dict]) -> bool:
    return now.keys() == then.keys() and all(
        now[name].keys() == then[name].keys() and all(now[name][key] is then[name][key] for key in then[name])
        for name in then)


def _same_objects(now: dict[str, tuple], then: dict[str, tuple]) -> bool:
    return now.keys() == then.keys() and all(a is b for name in then for a, b in zip(now[name], then[name]))


def _shadowed_methods(grading: object) -> list[str]:
    """Instance attributes that hide one of the grader's methods (`grading.judge = ...`)."""
    cls = type(grading)
    return sorted(name for name in vars(grading) if callable(getattr(cls, name, None)))


class Snapshot:
    """The grade's state at one moment, and `changes(grading)`: what differs now, in words (empty: nothing)."""

    def __init__(self, grading: Any) -> None:
        self.fields = {name: getattr(grading, name, None) for name in FIELDS}
        self.values = {name: copy.deepcopy(self.fields[name]) for name in ("payload", "configs", "atol", "rtol",
                                                                            "seed", "draws", "device")}
        self.settings = copy.deepcopy(vars(self.fields["settings"])) if self.fields["settings"] is not None else None
        self.result = copy.deepcopy(grading.result)
        self.weights = _weights(self.fields["reference"])
        # the values too: a write through `.data` or a raw pointer moves no version counter
        self.contents = [tensor.clone() for tensor in _tensors(self.fields["reference"])]
        self.task = _task_functions(self.fields["namespace"])
        self.classes = _task_classes(self.fields["namespace"])
        self.modules = _module_state(self.fields["reference"])
        self.running = Baseline()   # a thread, timer or handler the stretch leaves runs beside the grader's checks

    def release(self) -> None:
        """Drop the copies of the reference's values (a stretch's check is done; `changes(whole=False)` needs none)."""
        self.contents = []

    def changes(self, grading: Any, whole: bool = True) -> list[str]:
        """What differs now, in words; `whole=False`: only what stays fixed for the whole grade (not the result, which
        the grader writes, nor the reference's weights or its module's names, which a reference may write itself)."""
        found = []
        for name, value in self.fields.items():
            if getattr(grading, name, None) is not value:
                found.append(f"the grader's {name} was replaced")
        for name, value in self.values.items():
            if not _same(getattr(grading, name, None), value):
                found.append(f"the grader's {name} was changed")
        if self.settings is not None and not _same(vars(self.fields["settings"]), self.settings):
            found.append("the settings the reference runs under were changed")
        if whole and not _same(grading.result, self.result):
            found.append("the grade's result was written")
        if whole and (_weights(self.fields["reference"]) != self.weights or not all(
                same_bits(now, then) for now, then in zip(_tensors(self.fields["reference"]), self.contents))):
            found.append("the reference model's weights were replaced or written")
        if whole and not _same_objects(_task_functions(self.fields["namespace"]), self.task):
            found.append("the task's functions or sizes were replaced")
        if whole and not _same_classes(_task_classes(self.fields["namespace"]), self.classes):
            found.append("the task's classes were changed")
        if whole and _module_state(self.fields["reference"]) != self.modules:
            found.append("the reference model's modules were given new attributes or hooks")
        # a thread `_thread` started has no frame until it first runs: the grade's, not the stretch's, are known
        loaded = getattr(grading, "loaded", None)
        known = loaded.running.idents if isinstance(loaded, Snapshot) else None
        left = self.running.running(SOLUTION_FILENAME, known, unlisted=grading.strict) if whole else []
        if left:
            found.append(f"the solution left {left[0]} running beside the grader's checks and timing")
        shadowed = _shadowed_methods(grading)
        if shadowed:
            found.append(f"the grader's method {shadowed[0]} was shadowed")
        return found


def _same(now: object, then: object) -> bool:
    """Equal, and of the same type at every level (an object of the solution's that compares or prints as the
    value it replaced is a change); NaN equals NaN."""
    if type(now) is not type(then):
        return False
    if isinstance(then, float):
        return now == then or (now != now and then != then)
    if isinstance(then, dict):
        return _same(list(now), list(then)) and all(_same(now[key], then[key]) for key in then)
    if isinstance(then, list | tuple):
        return len(now) == len(then) and all(_same(a, b) for a, b in zip(now, then))
    if dataclasses.is_dataclass(then):
        return all(_same(getattr(now, field.name), getattr(then, field.name)) for field in dataclasses.fields(then))
    return bool(now == then)
