"""The --device option every command shares: auto (CUDA when a GPU is visible, else the CPU), cuda or cpu."""

from __future__ import annotations

import sys

from opgen.sandbox.gpus import resolve_device

DEVICES = ("auto", "cuda", "cpu")


def add_device_option(parser, what: str) -> None:
    """--device, default auto; `what` says what runs on it."""
    parser.add_argument("--device", choices=DEVICES, default="auto",
                        help=f"{what} (default auto: cuda when a GPU is visible, else cpu)")


def chosen_device(requested: str) -> tuple[str, list[str]]:
    """resolve_device (opgen.sandbox.gpus), what auto chose said on stderr."""
    device, gpus, note = resolve_device(requested)
    if note:
        print(f"opgen: {note}", file=sys.stderr)
    return device, gpus
