"""Tensor comparisons the execute checks share: bit equality, allclose at the environment's tolerance, diffs.

Comparisons run in float64 a chunk at a time: a whole GPU-sized output converted at once, with allclose's
temporaries, held about ten times the output's float32 size, and a dozen workers share the GPU's memory (on
an H200 with 12 workers, the checks' peak GPU memory median fell from 13.3 to 8.7 GB, docs/benchmarks.md, "GPU
build"). Every result is the one a whole-tensor comparison gives.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from filters.execute import fused

CHUNK_ELEMENTS = 1 << 24  # a float64 chunk is 128 MB


def flat_values(t: torch.Tensor) -> torch.Tensor:
    """The tensor's values as one flat tensor in its own dtype (complex as pairs of reals); a view when it can."""
    t = t.detach()
    return (torch.view_as_real(t) if t.is_complex() else t).reshape(-1)


def float64_chunks(t: torch.Tensor) -> Iterator[torch.Tensor]:
    """The tensor's flat values in float64, CHUNK_ELEMENTS at a time."""
    return _chunks(flat_values(t))


def _chunks(values: torch.Tensor) -> Iterator[torch.Tensor]:
    for start in range(0, values.numel(), CHUNK_ELEMENTS):
        yield values[start:start + CHUNK_ELEMENTS].double()


def _flat_pairs(a: list[torch.Tensor], b: list[torch.Tensor]) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Each pair of comparable tensors' flat values, empty ones left out."""
    for x, y in zip(a, b):
        if x.numel():
            yield flat_values(x), flat_values(y)


def shapes(tensors: list[torch.Tensor]) -> list[list[int]]:
    return [list(t.shape) for t in tensors]


def bit_equal(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and x.device == y.device and torch.equal(x, y) for x, y in zip(a, b))


def _value_count(t: torch.Tensor) -> int:
    return t.numel() * (2 if t.is_complex() else 1)   # flat_values(t).numel(), without flattening a copy


def _comparable(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return (len(a) == len(b) and shapes(a) == shapes(b)
            and all(_value_count(x) == _value_count(y) for x, y in zip(a, b)))


def _gathered(scalars: list[torch.Tensor]) -> torch.Tensor:
    """Per-chunk results (0-d tensors, on the device) as one tensor: read with one wait for the GPU, where a
    read per chunk waited for its turn on a GPU time-shared by a dozen worker processes (about 2 s a candidate
    on an H200 with 12 workers)."""
    if len({s.device for s in scalars}) > 1:
        scalars = [s.cpu() for s in scalars]
    return torch.stack(scalars)


def all_close(a: list[torch.Tensor], b: list[torch.Tensor], atol: float, rtol: float) -> bool:
    if not _comparable(a, b):
        return False
    flags = []
    for x, y in _flat_pairs(a, b):
        if fused.serves(x, y):
            flags.append(fused.not_close_count(x, y, atol, rtol) == 0)
        else:   # torch.allclose, chunk by chunk
            flags += [torch.isclose(cx, cy, rtol=rtol, atol=atol, equal_nan=True).all()
                      for cx, cy in zip(_chunks(x), _chunks(y))]
    return bool(_gathered(flags).all()) if flags else True


def max_abs_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float | None:
    if not _comparable(a, b):
        return None
    diffs = []
    for x, y in _flat_pairs(a, b):
        if fused.serves(x, y):
            diffs.append(fused.max_abs_diff(x, y))
        else:
            diffs += [(cx - cy).abs().nan_to_num(nan=float("inf")).max() for cx, cy in zip(_chunks(x), _chunks(y))]
    return _gathered(diffs).max().item() if diffs else 0.0


def abs_max(tensors: list[torch.Tensor]) -> float:
    """The largest absolute value over the tensors' values (complex as pairs of reals); NaN if one is NaN."""
    maxima = [chunk.abs().max() for t in tensors for chunk in float64_chunks(t)]
    return _gathered(maxima).max().item() if maxima else 0.0


def every_value(tensors: list[torch.Tensor], value: torch.Tensor | float) -> bool:
    """Whether every value of the tensors (in float64; complex as pairs of reals) equals `value`."""
    flags = [(chunk == value).all() for t in tensors for chunk in float64_chunks(t)]
    return bool(_gathered(flags).all()) if flags else True


def values_digest(values: list) -> tuple:
    """A fingerprint of a list of inputs: each tensor's dtype, shape and float64 sum (exact bits as hex), each
    other value's repr. Two draws from the same seed give the same fingerprint."""
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    sums = [sum((chunk.sum() for chunk in float64_chunks(t)), torch.zeros((), dtype=torch.float64, device=t.device))
            for t in tensors]
    read = iter(_gathered(sums).tolist() if sums else [])
    return tuple((str(v.dtype), tuple(v.shape), next(read).hex()) if isinstance(v, torch.Tensor) else repr(v)
                 for v in values)


def _accepted(reference: torch.Tensor, answer: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """How many values of `answer` the consumer's check accepts for `reference` (a 0-d count, on the device).

    |answer - reference| <= atol + rtol * max(|answer|, |reference|): accepted by torch.allclose whichever of the
    two the check takes as its reference (KernelBench scales rtol by the candidate's output)."""
    scale = torch.maximum(reference.abs(), answer.abs())
    return ((reference - answer).abs() <= atol + rtol * scale).sum()


def _median_of(t: torch.Tensor, sample: int = 1 << 20) -> torch.Tensor:
    """The median of a strided sample of at most about `sample` of the tensor's values, in float64 (0-d)."""
    values = flat_values(t)
    return values[::max(1, values.numel() // sample)].double().median()


def accepted_shares(draws: list[list[torch.Tensor]], atol: float, rtol: float) -> dict[str, float]:
    """The share of output values, over every draw, at which the consumer's check accepts a cheap wrong answer.

    `zero`: all zeros; `constant`: one constant per output tensor, the median of the previous draw's output (a
    value a kernel can hold without reading its input; the same draw's median would pass every one-value output
    by construction); `stale`: draw 0's output given as the answer for each later draw (a kernel that stores one
    answer). Draws must be comparable (same shapes) for `stale`, else it is 0."""
    zero, constant, stale = [], [], []
    total = 0
    medians = [[_median_of(t) if t.numel() else None for t in outputs] for outputs in draws]
    first = draws[0]
    for index, outputs in enumerate(draws):
        previous = medians[index - 1]
        stale_answers = first if index and _comparable(first, outputs) else None
        for position, t in enumerate(outputs):
            total += _value_count(t)
            if not t.numel():
                continue
            median = previous[position] if position < len(previous) and previous[position] is not None \
                else medians[index][position]
            values = flat_values(t)
            answer = flat_values(stale_answers[position]) if stale_answers is not None else None
            if fused.serves(values, *([] if answer is None else [answer])):
                counts = fused.accepted_counts(values, median.to(values.device), answer, atol, rtol)
                zero.append(counts[0])
                constant.append(counts[1])
                stale += [] if answer is None else [counts[2]]
                continue
            for chunk in _chunks(values):
                zero.append(_accepted(chunk, torch.zeros((), dtype=chunk.dtype, device=chunk.device), atol, rtol))
                constant.append(_accepted(chunk, median.to(chunk.device), atol, rtol))
            if answer is not None:
                stale += [_accepted(y, x, atol, rtol) for x, y in zip(_chunks(answer), _chunks(values))]
    if not total:
        return {"zero": 0.0, "constant": 0.0, "stale": 0.0}
    later = total - sum(_value_count(t) for t in first)
    counts = _gathered([_summed(counts) for counts in (zero, constant, stale)]).tolist()
    return {"zero": counts[0] / total, "constant": counts[1] / total, "stale": counts[2] / later if later else 0.0}


def _summed(counts: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack(counts).sum() if counts else torch.zeros((), dtype=torch.int64)
