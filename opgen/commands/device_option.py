"""The --device option every command shares: auto (CUDA when a GPU is visible, else the CPU), cuda or cpu."""

from __future__ import annotations

import sys

DEVICES = ("auto", "cuda", "cpu")


def add_device_option(parser, what: str) -> None:
    """--device, default auto; `what` says what runs on it."""
    parser.add_argument("--device", choices=DEVICES, default="auto",
                        help=f"{what} (default auto: cuda when a GPU is visible, else cpu)")


def resolve_device(requested: str) -> tuple[str, list[str], str]:
    """(cuda or cpu, the visible GPUs, what auto chose: "" for an explicit device). An explicit cuda needs a GPU
    (else one UsageError line saying why there is none); auto takes CUDA when a GPU is visible, else the CPU."""
    from opgen.sandbox.gpus import require_cuda, visible_gpus

    if requested == "cuda":
        return "cuda", require_cuda(), ""
    if requested == "cpu":
        return "cpu", [], ""
    gpus = visible_gpus()
    device = "cuda" if gpus else "cpu"
    seen = f"GPU(s) {', '.join(gpus)} visible" if gpus else "no CUDA device visible"
    return device, gpus, f"--device auto: {device} ({seen})"


def chosen_device(requested: str) -> tuple[str, list[str]]:
    """resolve_device, what auto chose said on stderr."""
    device, gpus, note = resolve_device(requested)
    if note:
        print(f"opgen: {note}", file=sys.stderr)
    return device, gpus
