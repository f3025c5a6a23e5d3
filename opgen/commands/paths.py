"""The paths a command reads, checked before any other work: a missing one is one line naming it (exit 2)."""

from __future__ import annotations

import os
from pathlib import Path

from opgen.errors import UsageError

# Every command's --reference: the README's "KernelBench" section states the rule (kernels_ref.resolve_reference).
REFERENCE_HELP = ("KernelBench: a JSONL/parquet file with code, level, name, problem_id, a checkout folder, or a Hub "
                  "id (default: $OPGEN_KERNELBENCH, else ../shared/kernelbench/problems.jsonl beside the clone or "
                  "the current folder, else the Hub's ScalingIntelligence/KernelBench)")


def require_existing(path: str | os.PathLike | None, what: str) -> None:
    """UsageError `WHAT PATH does not exist` when `path` is given and nothing is there."""
    if path is not None and not Path(path).expanduser().exists():
        raise UsageError(f"{what} {path} does not exist")
