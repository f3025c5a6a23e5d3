"""Argument types for the limits every command takes: seconds a task may run, memory a worker may hold."""

from __future__ import annotations

import argparse
import math


def seconds(text: str) -> float:
    """A time limit: a finite number of seconds above 0 (`nan` or `inf` would lift the limit)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds above 0, not {text!r}")
    return value


def megabytes(text: str) -> int:
    """A memory limit in MB: 0 for none, else a whole number above 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of MB: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (no limit) or more MB, not {text!r}")
    return value
