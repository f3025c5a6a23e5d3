"""Machine faults: the one rule that tells an error of the machine (no CUDA, a lost GPU, a worker that cannot
start) from an error of the task, so that the machine's never becomes a task's verdict (docs/spec.md, "Reason codes").

Two tests, both on a rejected candidate's error message:

- `machine_fault(message)`: the message itself names the machine (MACHINE_ERRORS). Errors that a task's own
  kernels cause (TASK_CUDA_ERRORS: a device-side assert, an illegal memory access, out of memory) never count,
  even though they too say "CUDA error": they repeat on any machine for the same task and shapes.
- `ErrorRun`: MACHINE_RUN candidates judged one after another, of at least MACHINE_RUN_CHAINS different operator
  chains, all rejected with one and the same message that mentions the GPU stack (MACHINE_WORDS). Different tasks
  do not fail identically; a broken GPU, driver or library makes every task fail the same way, whatever the
  message says.

A command that meets either stops with one line (`MachineFault`, exit 2) and writes no verdict for the candidates
in flight, so a run of the same command (on this machine once fixed, or on another) judges them again.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

from opgen.errors import MachineFault

T = TypeVar("T")

# (what the message contains, lower case) -> what it means, for the one line the command prints
MACHINE_ERRORS = (
    ("torch not compiled with cuda enabled", "this torch build has no CUDA"),
    ("no cuda gpus are available", "no CUDA device is visible"),
    ("found no nvidia driver", "no NVIDIA driver"),
    ("cuda driver version is insufficient", "the NVIDIA driver is too old for this torch"),
    ("cuda driver initialization failed", "the CUDA driver failed to initialise"),
    ("cuda error: initialization error", "the CUDA driver failed to initialise"),
    ("unsupported display driver / cuda driver combination", "the NVIDIA driver does not match this torch"),
    ("cudaerrordevicesunavailable", "the GPU is busy or unavailable"),
    ("busy or unavailable", "the GPU is busy or unavailable"),
    ("cudaerrornodevice", "no CUDA device is visible"),
    ("invalid device ordinal", "the GPU named by CUDA_VISIBLE_DEVICES is not there"),
    ("unspecified launch failure", "the GPU was lost (unspecified launch failure)"),
    ("cudaerrorlaunchfailure", "the GPU was lost (unspecified launch failure)"),
    ("fallen off the bus", "the GPU has fallen off the bus"),
    ("uncorrectable ecc error", "the GPU reported an uncorrectable ECC error"),
    ("cuda error: unknown error", "the GPU failed (CUDA unknown error)"),
    ("unexpected error from cudagetdevicecount", "CUDA cannot start in this process"),
    ("operation not supported on this os", "CUDA cannot start in this process (an OS call it needs failed)"),
)
# CUDA errors a task's own kernels cause: the same task fails the same way on any machine
TASK_CUDA_ERRORS = ("device-side assert", "illegal memory access", "misaligned address", "out of memory")
MACHINE_RUN = 8          # candidates judged one after another with the same message ...
MACHINE_RUN_CHAINS = 3   # ... from at least this many different operator chains
MACHINE_WORDS = ("cuda error", "cuda driver", "cudnn_status", "cublas_status", "cusolver", "cufft", "curand",
                 "nccl", "nvml", "driver", "gpu")
_TASK_LOCATION = re.compile(r"\s*\[<task [^\]]*\]")


def machine_fault(message: str | None, device: str | None = None) -> str | None:
    """What the machine's fault is, when `message` (a rejection's detail, a worker's error) names one; else None.
    On a `device` "cpu" run none does: it asked for no GPU, so a task that reaches for CUDA there (`.cuda()`) fails
    by itself."""
    text = (message or "").lower()
    if not text or device == "cpu" or any(task in text for task in TASK_CUDA_ERRORS):
        return None
    return next((meaning for needle, meaning in MACHINE_ERRORS if needle in text), None)


def first_line(message: str | None) -> str:
    """The message's first line without the task's own location (`[<task x>:12]`): what two tasks' identical
    failures share."""
    line = next((part for part in (message or "").strip().splitlines() if part.strip()), "")
    return _TASK_LOCATION.sub("", line).strip()[:300]


class ErrorRun:
    """The candidates judged so far, in order, as far as they bear on the run rule (see the module's docstring)."""

    def __init__(self, length: int = MACHINE_RUN, chains: int = MACHINE_RUN_CHAINS):
        self.length, self.chains = length, chains
        self.message: str | None = None
        self.run_chains: list[tuple] = []

    def add(self, keep: bool, message: str | None, chain: tuple) -> str | None:
        """Count one judged candidate (its verdict, error message, operator chain); the fault once the run is long
        enough, else None."""
        line = first_line(message)
        if keep or not line or not any(word in line.lower() for word in MACHINE_WORDS):
            self.message, self.run_chains = None, []
            return None
        if line != self.message:
            self.message, self.run_chains = line, []
        self.run_chains.append(tuple(chain))
        if len(self.run_chains) >= self.length and len(set(self.run_chains)) >= self.chains:
            return (f"{len(self.run_chains)} candidates of {len(set(self.run_chains))} different operator chains "
                    f"failed in a row with the same error ({line})")
        return None

    def check(self, lines: list[dict], records: list[dict], detail_key: str = "detail",
              device: str | None = None) -> None:
        """Raise MachineFault at the first of `lines` (verdict lines, or timed records, of `records`, in the order
        judged) whose message names the machine or completes a run; otherwise count them all. A record's chain is
        its `families` (else `ops`; else its id: a task without them counts as a chain of its own)."""
        for line, record in zip(lines, records):
            message = line.get(detail_key)
            check_message(message, device)
            chain = tuple(record.get("families") or record.get("ops") or (record.get("id"),))
            fault = self.add(bool(line.get("keep", not message)), message, chain)
            if fault:
                raise MachineFault(fault)


def check_message(message: str | None, device: str | None = None) -> None:
    """Raise MachineFault when `message` names a machine fault (see `machine_fault`)."""
    meaning = machine_fault(message, device)
    if meaning:
        raise MachineFault(f"{meaning}: {first_line(message)}")


def retried_after_harness_failure(attempt: Callable[[], T], *, reset: Callable[[], None], what: str, lost: str,
                                  stopped: Callable[[], bool] = lambda: False) -> T | None:
    """`attempt()`, and once more when the harness itself fails under it (any exception but a MachineFault: a pipe
    to a worker closed under it, a pool stopped): such a failure is no task's verdict. `reset` drops the kept
    workers first, so the second try runs in fresh ones; a second failure is the machine's fault (`what` failed
    twice, `lost`). None once `stopped()` (the caller no longer wants the result)."""
    for tries in (1, 2):
        try:
            return attempt()
        except MachineFault:
            raise
        except Exception as error:  # noqa: BLE001 - the harness's failure, reported as the machine's
            reset()
            if stopped():
                return None
            if tries == 2:
                raise MachineFault(f"{what} failed twice, {lost}: {type(error).__name__}: {error}") from error
    return None
