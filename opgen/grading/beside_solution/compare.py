"""Comparing a solution's outputs with the reference's: structure, type, shape, dtype, device, values (NaN and
infinity never pass for a finite value), storage shared with inputs, inputs written, bits that changed."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from filters.execute.tensors import float64_chunks


@dataclass
class Comparison:
    """The verdict of one comparison: `reason` None when the outputs agree; the worst error either way."""

    reason: str | None = None
    detail: str | None = None
    max_abs_error: float | None = None
    tolerance_ratio: float | None = None   # max |c - r| / (atol + rtol |r|) over finite reference values: <= 1 passes
    non_finite_values: int = 0             # NaN or infinite where the reference is finite (no error is defined there)


class OutputFormatError(Exception):
    """The outputs are not a tensor or a structure of plain tensors."""


def output_tensors(output: object, strict: bool = True) -> list[torch.Tensor]:
    """The tensors of a forward's output in order (a tensor, or nested tuples/lists/dicts of them; Python numbers
    become tensors). A tensor subclass is refused: its own __torch_function__ could answer the comparison itself.
    Containers are read with the built-in types' own methods, never a subclass's: a list whose `__iter__` computes
    the answer when the grader reads it (after the clock stopped) gives only what it held when returned. Not
    `strict` (on CUDA until a GPU has run it: guard.hardened), containers are read through their own methods and
    a dict in its own order, as before."""
    found: list[torch.Tensor] = []
    _walk(output, found, strict)
    if not found:
        raise OutputFormatError(f"forward returned no tensor ({type(output).__name__})")
    return found


def output_structure(output: object) -> str:
    """The shape of a forward's output as containers of tensors, read as `output_tensors` reads it: "T" a tensor or
    a Python number, "(T, T)" a list or tuple (the two are alike), "{'a': T}" a dict (its keys in sorted order, as
    `output_tensors` gives its tensors). A solution must return the reference's structure."""
    return _walk(output, [])


def _walk(value: object, found: list[torch.Tensor], strict: bool = True) -> str:
    kind = type(value)
    if issubclass(kind, torch.Tensor):
        if kind not in (torch.Tensor, torch.nn.Parameter):
            raise OutputFormatError(f"an output is a {kind.__name__}, not a torch.Tensor")
        found.append(torch.Tensor.detach(value))
        return "T"
    if issubclass(kind, tuple | list):
        items = value if not strict else tuple.__iter__(value) if issubclass(kind, tuple) else list.__iter__(value)
        return "(" + ", ".join(_walk(item, found, strict) for item in items) + ")"
    if issubclass(kind, dict):
        if not strict:
            return "{" + ", ".join(_walk(item, found, strict) for item in value.values()) + "}"
        items = sorted(((_key(key), item) for key, item in dict.items(value)), key=lambda pair: pair[0])
        return "{" + ", ".join(f"{key}: {_walk(item, found)}" for key, item in items) + "}"   # in any order
    if kind in (bool, int, float) or (not strict and isinstance(value, bool | int | float)):
        found.append(torch.tensor(value))
        return "T"
    raise OutputFormatError(f"an output is a {kind.__name__}")


def _key(key: object) -> str:
    return repr(key) if type(key) in (str, int) else type(key).__name__   # no repr of the solution's own


def format_problem(candidate: list[torch.Tensor], reference: list[torch.Tensor]) -> str | None:
    """How the outputs' number, shapes, dtypes or devices differ; None when they match."""
    if len(candidate) != len(reference):
        return f"{len(candidate)} output tensors, the reference returns {len(reference)}"
    for i, (c, r) in enumerate(zip(candidate, reference)):
        if c.shape != r.shape:
            return f"output {i} has shape {list(c.shape)}, the reference's {list(r.shape)}"
        if c.dtype != r.dtype:
            return f"output {i} is {c.dtype}, the reference's {r.dtype}"
        if c.device.type != r.device.type:
            return f"output {i} is on {c.device.type}, the reference's on {r.device.type}"
    return None


def compare_values(candidate: list[torch.Tensor], reference: list[torch.Tensor], atol: float,
                   rtol: float) -> Comparison:
    """Values within |c - r| <= atol + rtol |r| where the reference is finite; where it is NaN or infinite the
    solution must give the same (NaN, or the infinity of the same sign). `non_finite` when the solution is NaN or
    infinite where the reference is finite, else `mismatch` when anything else differs."""
    worst_abs, worst_ratio = 0.0, 0.0
    non_finite = mismatch = 0
    first: str | None = None
    for index, (c_tensor, r_tensor) in enumerate(zip(candidate, reference)):
        for c, r in zip(float64_chunks(c_tensor), float64_chunks(r_tensor.to(c_tensor.device))):
            finite = torch.isfinite(r)
            bad_special = (~finite & ~((c == r) | (torch.isnan(c) & torch.isnan(r)))).sum()
            c_finite = torch.isfinite(c)
            introduced = (finite & ~c_finite).sum()
            diff = torch.where(finite & c_finite, (c - r).abs(), torch.zeros_like(c))
            allowed = atol + rtol * torch.where(finite, r.abs(), torch.zeros_like(r))
            stats = torch.stack([introduced.double(), bad_special.double(), (diff > allowed).sum().double(),
                                 diff.max() if diff.numel() else diff.new_zeros(()),
                                 (diff / allowed.clamp_min(1e-300)).max() if diff.numel() else diff.new_zeros(())]).tolist()
            non_finite += int(stats[0])
            mismatch += int(stats[1] + stats[2])
            worst_abs, worst_ratio = max(worst_abs, stats[3]), max(worst_ratio, stats[4])
            if first is None and (stats[0] or stats[1] or stats[2]):
                first = f"output {index}"
    result = Comparison(max_abs_error=worst_abs, tolerance_ratio=worst_ratio, non_finite_values=non_finite)
    if non_finite:
        result.reason, result.detail = "non_finite", f"{first}: {non_finite} NaN or infinite values where the " \
                                                     "reference is finite"
    elif mismatch:
        result.reason, result.detail = "mismatch", (f"{first}: {mismatch} values beyond atol={atol}, rtol={rtol} "
                                                    f"(max abs error {worst_abs:.3g}, {worst_ratio:.3g}x the tolerance)")
    return result


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality (NaN equal to the same NaN), shape and dtype included."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    return torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8).to(a.device))


def modified_input(inputs: list, saved: list) -> int | None:
    """The index of the first tensor input whose values differ from its saved copy; None when none does."""
    for index, (now, before) in enumerate(zip(inputs, saved)):
        if isinstance(before, torch.Tensor) and not (isinstance(now, torch.Tensor) and same_bits(now, before)):
            return index
    return None


def aliased_input(outputs: list[torch.Tensor], inputs: list) -> tuple[int, int] | None:
    """(output index, input index) of the first output sharing storage with an input; None when none does."""
    storages = {}
    for index, value in enumerate(inputs):
        if isinstance(value, torch.Tensor) and value.untyped_storage().nbytes():
            storages.setdefault(value.untyped_storage().data_ptr(), index)
    for index, output in enumerate(outputs):
        if output.untyped_storage().nbytes() and output.untyped_storage().data_ptr() in storages:
            return index, storages[output.untyped_storage().data_ptr()]
    return None
