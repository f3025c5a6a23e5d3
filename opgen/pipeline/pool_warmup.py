"""What a sampling worker's first candidate would load, loaded once by the local executor's fork server.

Sampling a first candidate builds the vocabulary and, through the shape analysis on meta tensors, imports dynamo,
sympy and some 800 modules more: about 2-3 CPU seconds in every pool worker that the fork server forked before
it had them. The fork server imports this module (`POOL_PRELOAD`), which samples one candidate, so its workers
start with all of it loaded. Sampling depends only on the seed and the index: this candidate changes nothing.
"""

from __future__ import annotations

import contextlib

from opgen.sample.sampler import sample_records

# a warm-up only: whatever goes wrong here, the worker's own first candidate meets and reports it (an exception
# other than ImportError would stop the fork server)
with contextlib.suppress(Exception):
    sample_records(0, 0, 1, "smoke")
