"""Timing precision modes: PyTorch's defaults (matmul ieee, cuDNN conv and RNN tf32), ieee and tf32, as set and
read back per backend."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from opgen.timing.precision import apply_precision, current_precision


@pytest.fixture(autouse=True)
def restore_precision():
    saved = current_precision(torch)
    yield
    backends = {"matmul_precision": torch.backends.cuda.matmul, "cudnn_conv_precision": torch.backends.cudnn.conv,
                "cudnn_rnn_precision": torch.backends.cudnn.rnn}
    for key, backend in backends.items():
        backend.fp32_precision = saved[key]


def test_default_is_pytorchs_own_default():
    assert apply_precision(torch, "default") == {"matmul_precision": "ieee", "cudnn_conv_precision": "tf32",
                                                 "cudnn_rnn_precision": "tf32"}


def test_ieee_and_tf32_set_every_backend():
    assert set(apply_precision(torch, "ieee").values()) == {"ieee"}
    assert set(apply_precision(torch, "tf32").values()) == {"tf32"}
    assert current_precision(torch)["cudnn_conv_precision"] == "tf32"


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError):
        apply_precision(torch, "bf16")


def test_default_mode_is_what_a_fresh_process_runs_with():
    """`default` is not our guess of PyTorch's defaults: a process that never set a flag reports the same."""
    probe = ("import json, torch; from opgen.timing.precision import current_precision; "
             "print(json.dumps(current_precision(torch)))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert json.loads(done.stdout) == apply_precision(torch, "default")
