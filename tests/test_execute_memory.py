"""The execute checks' memory: comparisons a chunk at a time, and one later draw's inputs held at a time."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from filters.base import judge
from filters.execute import STAGES, tensors
from filters.execute.degenerate import constant_detail
from filters.execute.task_run import TaskRun


def _whole_all_close(a, b, atol, rtol):  # the comparison as it ran before chunking: every value at once
    return all(torch.allclose(x.double(), y.double(), atol=atol, rtol=rtol, equal_nan=True) for x, y in zip(a, b))


def _whole_max_abs_diff(a, b):
    return max(((x.double() - y.double()).abs().nan_to_num(nan=float("inf")).max().item() if x.numel() else 0.0
                for x, y in zip(a, b)), default=0.0)


def _pairs() -> list[tuple[list[torch.Tensor], list[torch.Tensor]]]:
    torch.manual_seed(0)
    x = torch.randn(6, 17)
    near = x + 1e-3
    far_in_last_chunk = x.clone()
    far_in_last_chunk[-1, -1] += 1.0
    nan_here = x.clone()
    nan_here[3, 5] = float("nan")
    both_nan = nan_here.clone()
    inf_one_side = x.clone()
    inf_one_side[0, 1] = float("inf")
    transposed = torch.randn(17, 6).t()   # not contiguous
    return [([x], [near]), ([x], [far_in_last_chunk]), ([x], [nan_here]), ([nan_here], [both_nan]),
            ([x], [inf_one_side]), ([transposed], [transposed.contiguous() + 2e-2]),
            ([x, torch.arange(5)], [near, torch.arange(5)]), ([torch.empty(0, 3)], [torch.empty(0, 3)]),
            ([x > 0], [near > 0])]


@pytest.mark.parametrize("index", range(9))
def test_chunked_comparisons_give_the_whole_tensor_answers(monkeypatch, index):
    monkeypatch.setattr(tensors, "CHUNK_ELEMENTS", 7)   # many chunks, the last one short
    a, b = _pairs()[index]
    for atol in (1e-2, 1e-5):
        assert tensors.all_close(a, b, atol, atol) == _whole_all_close(a, b, atol, atol)
    assert tensors.max_abs_diff(a, b) == _whole_max_abs_diff(a, b)


def test_chunked_scans_of_one_output(monkeypatch):
    monkeypatch.setattr(tensors, "CHUNK_ELEMENTS", 7)
    x = torch.randn(5, 9)
    assert tensors.abs_max([x]) == x.abs().max().item()
    x[4, 8] = float("nan")
    assert tensors.abs_max([x]) != tensors.abs_max([x])   # NaN, wherever it lies
    assert constant_detail([torch.zeros(5, 9)]) == "output is all zero"
    assert constant_detail([torch.full((5, 9), 2.5), torch.tensor([2.5])]) == "output is constant (2.5)"
    late = torch.full((5, 9), 2.5)
    late[4, 8] = 2.0
    assert constant_detail([late]) is None
    assert constant_detail([torch.tensor([3.0])]) is None
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    assert tensors.values_digest([a, 2]) == tensors.values_digest([a.clone(), 2]) != tensors.values_digest([b, 2])


def test_a_comparison_reads_its_chunks_results_at_once(monkeypatch):
    """Each comparison waits for the device once, not once a chunk: on a GPU time-shared by a dozen worker
    processes a wait a chunk made the checks 2 s slower a candidate (docs/benchmarks.md, "GPU build")."""
    monkeypatch.setattr(tensors, "CHUNK_ELEMENTS", 7)
    reads: list[str] = []
    for name in ("item", "__bool__", "tolist"):
        real = getattr(torch.Tensor, name)
        monkeypatch.setattr(torch.Tensor, name, lambda self, real=real, name=name: reads.append(name) or real(self))
    x, y = torch.randn(5, 9), torch.randn(5, 9)
    for compare in (lambda: tensors.all_close([x], [y], 1e-2, 1e-2), lambda: tensors.max_abs_diff([x], [y]),
                    lambda: tensors.abs_max([x]), lambda: tensors.every_value([x], 0.0),
                    lambda: tensors.values_digest([x, y])):
        reads.clear()
        compare()
        assert len(reads) == 1, reads


def test_a_comparison_holds_a_chunk_in_float64_not_the_outputs():
    """Two 128 MB float32 outputs compared: the process's peak grows by chunks, not by float64 copies of both
    (512 MB, and allclose's temporaries on top), as it did when the comparison converted whole outputs."""
    script = textwrap.dedent("""
        import resource, torch
        from filters.execute import tensors
        tensors.CHUNK_ELEMENTS = 1 << 20
        torch.set_num_threads(1)
        x = torch.rand(1 << 25); y = x + 1e-4
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        assert tensors.all_close([x], [y], 1e-2, 1e-2) and tensors.max_abs_diff([x], [y]) < 1e-3
        print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
    """)
    # every block over 64 kB mapped on its own: freed chunks go back to the system, so the peak is the chunks'
    # (the heap would keep them, pinned by the small per-chunk results between them)
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    grown_mb = int(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                                  env=env).stdout.split()[-1])
    assert grown_mb < 64, f"the comparison grew the process by {grown_mb} MB"


TRACKED_TASK = """
import weakref
import torch

DRAWN = []   # a weak reference to every input tensor get_inputs made

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.linear(x)) {extra}

def get_inputs():
    x = torch.randn(4, 8)
    DRAWN.append(weakref.ref(x))
    return [x {shift}]

def get_init_inputs():
    return []
"""


def _counting_live_inputs(run: TaskRun, monkeypatch) -> list[int]:
    """Before every forward pass (eager or compiled), how many of the task's drawn inputs are alive."""
    import filters.execute.compile as compile_module
    import filters.execute.task_run as task_run_module

    live: list[int] = []

    def wrap(real):
        def run_forward(model, inputs):
            live.append(sum(ref() is not None for ref in run.namespace["DRAWN"]))
            return real(model, inputs)
        return run_forward

    monkeypatch.setattr(task_run_module, "run_forward", wrap(task_run_module.run_forward))
    monkeypatch.setattr(compile_module, "run_forward", wrap(compile_module.run_forward))
    return live


def test_the_checks_hold_draw_zero_and_one_later_draw_at_most(monkeypatch):
    """Four draws of inputs used to stay alive to the end of the checks; a later draw is now drawn again where
    it is needed, so at most draw 0's inputs and one other draw's are alive during any forward pass."""
    run = TaskRun(code=TRACKED_TASK.format(extra="", shift=""), name="tracked", draws=3)
    live = _counting_live_inputs(run, monkeypatch)
    verdict = judge(run, STAGES)
    assert verdict.keep, verdict.detail
    assert len(run.namespace["DRAWN"]) == 1 + 3 + 3   # draw 0, draws 1-3 in degenerate, again in compile
    assert max(live) == 2 and len(live) >= 10


def test_inputs_that_do_not_come_back_from_their_seed_are_rejected():
    """get_inputs that does not draw through torch's seeded generator gives other inputs when drawn again: the
    environment could not reproduce the draws either, so the task is rejected, naming the draw."""
    code = TRACKED_TASK.format(extra="", shift="+ len(DRAWN)")   # each call shifts its draw by a call count
    run = TaskRun(code=code, name="unseeded", draws=3)
    verdict = judge(run, STAGES)
    assert verdict.reason == "nondeterministic" and "get_inputs gave other inputs" in verdict.detail
    assert verdict.stages[-1][0] == "compile"   # the first check that draws a later draw again
