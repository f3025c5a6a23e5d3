"""The state one task's execute checks share inside a worker, and which check fills which field.

Every check reads only fields that an earlier check in `filters.execute.STAGES` writes (a test holds the
order to this): `eager` loads the task and fills `namespace`, `model`, `inputs` (draw 0's), `outputs[0]`,
`work_ops`; `degenerate` runs the further input draws and appends their outputs, keeping only a fingerprint of
their inputs (`input_digests`; `inputs_of` draws them again); the rest only read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from filters.execute.tensors import values_digest
from filters.window import DEFAULT_WINDOW_MS, Window
from opgen.errors import TaskProblem
from opgen.sandbox.gpu_memory import release_cache_if_short
from opgen.sandbox.gpus import LockWaits, gpu_lock, holding_gpu_lock
from opgen.sandbox.task import draw_inputs, input_seed, run_forward, synchronize
from opgen.taskcode.dtypes import DEFAULT_DTYPE, TOLERANCES, Tolerance, tolerance_of


@dataclass
class TaskRun:
    """Everything the checks of one task read and write."""

    code: str
    name: str
    device: str = "cpu"
    seed: int = 0
    draws: int = 3
    window: Window | None = None
    timing_runs: int = 5
    namespace: dict = field(default_factory=dict)
    model: torch.nn.Module | None = None
    inputs: list = field(default_factory=list)  # draw 0's inputs, which most checks run on
    outputs: list[list[torch.Tensor]] = field(default_factory=list)  # eager outputs, one per draw
    input_digests: dict[int, tuple] = field(default_factory=dict)  # later draws' input fingerprints (`inputs_of`)
    work_ops: int = 0
    gpu_lock_path: str | None = None  # the GPU's lock (opgen.sandbox.gpus), shared by checks beside timed runs
    lock_waits: LockWaits = field(default_factory=LockWaits)   # the checks' holds of that lock, their waits
    cache_releases: int = 0   # holds that ended giving the allocator's cache back, the device short of memory
    longest_hold_check: str | None = None   # the check that took the longest of those holds (on CUDA)
    held_by_check: dict[str, float] = field(default_factory=dict)   # seconds each check held the lock (on CUDA)
    device_s_by_check: dict[str, float] = field(default_factory=dict)   # the device's seconds on each (device_time.py)
    float64_device_s_by_check: dict[str, float] = field(default_factory=dict)   # those on float64 values

    @classmethod
    def from_payload(cls, payload: dict) -> TaskRun:
        """The run of one payload; the window is the payload's, else the default on CUDA, else none."""
        device = payload.get("device", "cpu")
        window = payload.get("runtime_window_ms")
        if window:
            window = Window(*window)
        elif device.startswith("cuda"):
            window = Window(*DEFAULT_WINDOW_MS)
        return cls(code=payload["code"], name=str(payload.get("id", "task")), device=device,
                   seed=int(payload.get("seed", 0)), draws=int(payload.get("draws", 3)), window=window or None,
                   timing_runs=int(payload.get("timing_runs", 5)))

    @property
    def lock_wait_s(self) -> float:
        """Seconds the checks waited for the GPU's lock."""
        return self.lock_waits.seconds

    @property
    def tolerance(self) -> Tolerance:
        """The check of the task's precision (its outputs' dtype: fp32, bf16 or fp16), which every comparison of
        outputs uses; run-to-run on CUDA, its repeat tolerance (the CPU must be bit-identical)."""
        return tolerance_of(self.outputs[0]) if self.outputs else TOLERANCES[DEFAULT_DTYPE]

    def draw_seed(self, draw: int) -> int:
        return input_seed(self.seed, draw)

    def synchronize(self) -> None:
        synchronize(self.device)

    def inputs_of(self, draw: int) -> list:
        """Draw `draw`'s inputs: draw 0's are kept, a later draw's are drawn again from its seed each time.

        Four draws of GPU-sized inputs held at once, beside a dozen other workers' checks, ran tasks out of the
        GPU's memory (on an H200 with 12 workers, 82 candidates of an n = 150 build ran short at first; 5 once
        later draws were drawn again and comparisons ran a chunk at a time: docs/benchmarks.md, "GPU build");
        drawing again costs milliseconds on the GPU. A draw that does not come out as it did the first time
        (`get_inputs` not seeded by torch) rejects the task: the checks could not compare its draws, nor could
        the environment reproduce them."""
        if draw == 0:
            return self.inputs
        with self.sharing_gpu():
            inputs = draw_inputs(self.namespace, self.device, self.draw_seed(draw))
            digest = values_digest(inputs)  # reads the GPU, so the draw's kernels finish inside the hold
        if self.input_digests.setdefault(draw, digest) != digest:
            raise TaskProblem("nondeterministic", f"draw {draw}: get_inputs gave other inputs for the same seed")
        return inputs

    def sharing_gpu(self, lock_path: str | None = None) -> contextlib.AbstractContextManager[None]:
        """Hold the GPU's lock (`lock_path`, else the run's) in shared mode, counting the hold in `lock_waits`.

        Checks hold it around their GPU work only, one forward pass at a time: building a model's weights is
        host work, and a shared holder busy on the host keeps a waiting timed run, and everyone queued behind
        it, waiting. Wait for the GPU work before leaving (`synchronize`), or it runs on unlocked."""
        return self._holding_gpu(lock_path or self.gpu_lock_path, shared=True)

    def alone_on_gpu(self) -> contextlib.AbstractContextManager[None]:
        """Hold the GPU's lock exclusively, as a timed run does, counting the hold in `lock_waits`: the other
        workers' checks wait, so the passes inside have the GPU to themselves (`forward` inside it takes no
        second hold)."""
        return self._holding_gpu(self.gpu_lock_path, shared=False)

    @contextlib.contextmanager
    def _holding_gpu(self, path: str | None, shared: bool) -> Iterator[None]:
        """The hold, its wait counted; the GPU work started inside it is waited for before it ends, whatever
        happens (a task that raises may have kernels queued). An outermost hold on CUDA ends by giving the
        allocator's cached blocks back when the device runs short of memory (`release_cache_if_short`): the
        temporaries of its passes are of no use to the other workers while this one waits for its next hold."""
        outermost = not holding_gpu_lock(path)
        with gpu_lock(path, shared=shared, waits=self.lock_waits):
            try:
                yield
            finally:
                self.synchronize()
                if outermost and self.device.startswith("cuda") and release_cache_if_short():
                    self.cache_releases += 1

    def forward(self, model, inputs: list) -> list[torch.Tensor]:
        """One forward pass, waited for, holding the GPU's lock in shared mode.

        A hold per forward pass, not per check: a timed run that wants the GPU waits for the forward passes
        under way, not for every check's remaining ones (a check runs the model up to six times)."""
        with self.sharing_gpu():   # waited for before the hold ends: the lock covers the kernels, not their launch
            return run_forward(model, inputs)
