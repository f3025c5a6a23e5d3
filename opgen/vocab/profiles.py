"""Size profiles: `smoke` (tiny, CPU-fast) and `gpu` (base sizes later scaled to the 1-100 ms window)."""

from __future__ import annotations

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

# Base sizes for GPU tasks; `opgen.sample.sampler` then scales the batch so the estimated eager time lands
# inside the runtime window.
GPU = Sizes(
    name="gpu",
    batch=(8, 16),
    channels=(16, 32, 64, 128),
    features=(512, 1024, 2048, 4096),
    length=(256, 512, 1024),
    spatial=(32, 64, 128),
    volume=(16, 24, 32),
    heads=(4, 8, 16),
    max_numel=1 << 28,
)

PROFILES = {"smoke": SMOKE, "gpu": GPU}
