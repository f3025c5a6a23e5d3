"""The paths a command reads, checked before any other work: a missing one is one line naming it (exit 2)."""

from __future__ import annotations

import os
from pathlib import Path

from opgen.errors import UsageError


def require_existing(path: str | os.PathLike | None, what: str) -> None:
    """UsageError `WHAT PATH does not exist` when `path` is given and nothing is there."""
    if path is not None and not Path(path).expanduser().exists():
        raise UsageError(f"{what} {path} does not exist")
