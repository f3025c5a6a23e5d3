"""Sandbox worker warm-up: import what the pool's tasks import, and on CUDA create the context, before the first task."""

from __future__ import annotations

import importlib


def warm_up(payload: dict) -> dict:
    """Import `modules`; on `device` "cuda" (and one visible), run one small matmul there and free its memory."""
    for module in payload.get("modules", ()):
        importlib.import_module(module)
    if payload.get("device") == "cuda":
        import torch

        if torch.cuda.is_available():
            square = torch.ones(64, 64, device="cuda")
            (square @ square).sum().item()
            del square
            torch.cuda.empty_cache()
    return {}
