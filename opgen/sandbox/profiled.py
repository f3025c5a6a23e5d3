"""The device time a torch profile recorded: read by the timing protocol and by the checks' device-time diagnosis."""

from __future__ import annotations


def profiled_total_us(prof, device: str) -> float:
    """A profile's summed device time (µs): on CUDA its kernels' and copies', else its operators' own CPU time."""
    from torch.autograd import DeviceType

    events = prof.events()
    if device == "cuda":
        return sum(e.device_time_total for e in events if e.device_type == DeviceType.CUDA)
    return sum(e.self_cpu_time_total for e in events if e.device_type == DeviceType.CPU)


def profiled_float64_us(prof, device: str) -> float:
    """The part of `profiled_total_us` spent on float64 values (µs). On CUDA: the kernels whose name says `double`
    (a kernel's template names its element type: conversions to float64, elementwise ops and reductions alike).
    Else: the operators with a float64 input, which the profile knows only when it recorded shapes."""
    from torch.autograd import DeviceType

    events = prof.events()
    if device == "cuda":
        return sum(e.device_time_total for e in events if e.device_type == DeviceType.CUDA and "double" in e.name)
    return sum(e.self_cpu_time_total for e in events
               if e.device_type == DeviceType.CPU and "double" in (getattr(e, "input_dtypes", None) or ()))
