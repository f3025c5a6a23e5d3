"""Size profiles: `smoke` (tiny, CPU-fast) and `gpu` (sizes real models run at, later scaled to the 1-100 ms window)."""

from __future__ import annotations

from functools import lru_cache

from opgen.vocab.prior import CompositionPrior, load_prior
from opgen.vocab.spec import Sizes

SMOKE = Sizes(
    name="smoke",
    batch=(2, 4),
    channels=(3, 4, 8, 16),
    features=(16, 32, 64),
    length=(16, 32, 64),
    spatial=(8, 12, 16),
    volume=(4, 6, 8),
    heads=(1, 2, 4),
    max_numel=1 << 16,
)

# Starting batches of gpu tasks; `opgen.sample.fit` then grows the batch (within realistic bounds) and the
# spatial size or sequence length until the estimated eager time lands inside the runtime window.
GPU_BATCH = (1, 2, 4, 8)
# Clamps on the prior's tables for a starting size: wider layers exist (a 24,576-wide MLP), but a task built
# around one leaves the window at batch 1 for most operators.
GPU_LIMITS = {"channels": (3, 2048), "features": (16, 16384), "heads": (1, 64), "length": (16, 4096),
              "spatial": (7, 224), "volume": (4, 64)}


def gpu_sizes(prior: CompositionPrior) -> Sizes:
    """The gpu profile: every size drawn from the prior's size tables (channels, features, heads, sequence length,
    spatial side, volume side), weighted as real models use them, within GPU_LIMITS."""
    tables, weights = {}, []
    for kind, (lo, hi) in GPU_LIMITS.items():
        values, shares = prior.size_table(kind)
        kept = [(v, w) for v, w in zip(values, shares) if lo <= v <= hi]
        if not kept:
            raise ValueError(f"composition prior has no {kind} sizes in {lo}..{hi}")
        tables[kind] = tuple(v for v, _ in kept)
        weights.append((kind, tuple(w for _, w in kept)))
    return Sizes(name="gpu", batch=GPU_BATCH, max_numel=1 << 28, weights=tuple(weights), **tables)


@lru_cache(maxsize=8)
def _gpu(prior_path: str | None) -> Sizes:
    return gpu_sizes(load_prior(prior_path))


def profile_sizes(profile: str, prior_path: str | None = None) -> Sizes:
    """The sizes of a profile (`gpu` from the shipped prior, or the prior at `prior_path`)."""
    if profile == "smoke":
        return SMOKE
    if profile == "gpu":
        return _gpu(prior_path)
    raise KeyError(profile)


PROFILE_NAMES = ("gpu", "smoke")
