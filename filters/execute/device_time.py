"""A diagnosis of the execute checks: the seconds the device itself spent on each check's work, from torch's profiler.

A check's holds of the GPU's lock hold host work too (drawing inputs, launches, reading results back), which other
holders can overlap; a timed run's exclusive hold cannot overlap any of the checks' device work. With one check worker
alone on a GPU (`scripts/analysis/phases.py --workers 1 --device-time`), a check's device seconds beside its lock
seconds say how much of its holds is work on the GPU. Asked for by the payload (`device_time`); never in a build,
since the profiler slows the checks and reading its events is host work.
"""

from __future__ import annotations

from filters.base import Verdict, WrappedFilter
from filters.execute.task_run import TaskRun
from opgen.sandbox.profiled import profiled_float64_us, profiled_total_us


class DeviceTimed(WrappedFilter):
    """A check run under torch's profiler, its device seconds added to `run.device_s_by_check` once it ends, those
    on float64 values (the comparisons of filters/execute/tensors.py) to `run.float64_device_s_by_check` (same name,
    reasons and fields as the check it wraps, whose verdict it returns unchanged)."""

    def filter(self, run: TaskRun) -> Verdict:
        from torch.profiler import ProfilerActivity, profile

        on_cuda = run.device.startswith("cuda")
        # the CPU activity beside CUDA: some builds record device events only with it (opgen/timing/trials.py)
        activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if on_cuda else [ProfilerActivity.CPU]
        # on the CPU an operator's input dtypes are known only with its shapes recorded
        with profile(activities=activities, record_shapes=not on_cuda) as prof:
            try:
                verdict = self.check.filter(run)
            finally:
                run.synchronize()
        # read once the check, and any hold of the GPU's lock inside it, has ended: host work; a check that raised
        # (a verdict judge() makes) gets no figure
        device = "cuda" if on_cuda else "cpu"
        for figures, seconds in ((run.device_s_by_check, profiled_total_us(prof, device) / 1e6),
                                 (run.float64_device_s_by_check, profiled_float64_us(prof, device) / 1e6)):
            figures[self.name] = round(figures.get(self.name, 0.0) + seconds, 4)
        return verdict
