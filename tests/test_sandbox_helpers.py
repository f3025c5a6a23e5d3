"""Worker-side functions the sandbox tests run: well-behaved ones and ones that crash, hang or bloat."""

from __future__ import annotations

import os
import sys
import time


def echo(payload: dict) -> dict:
    return {"echo": payload, "pid": os.getpid(), "env": os.environ.get(payload.get("env_key", ""), None)}


def slow_echo(payload: dict) -> dict:
    time.sleep(0.5)
    return echo(payload)


def spin(payload: dict) -> dict:
    """Keep a core busy for 0.3 s of CPU time (not wall time: on a loaded machine the process gets less CPU than wall
    time, and the test reads how much CPU it used; a tenth of a core still ends it inside the 3 s limit)."""
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    return {"spun": True}


def raise_error(payload: dict) -> dict:
    raise ValueError("boom " + str(payload.get("n")))


def segfault(payload: dict) -> dict:
    import ctypes

    ctypes.string_at(0)
    return {}


def hard_exit(payload: dict) -> dict:
    os._exit(3)


def python_loop(payload: dict) -> dict:
    while True:
        pass


def c_hang(payload: dict) -> dict:
    time.sleep(10_000)  # blocks in C, never returns to the interpreter loop
    return {}


def bloat(payload: dict) -> dict:
    chunks = []
    while True:
        chunks.append(b"x" * (64 * 2**20))  # touched memory, 64 MB at a time


def not_json(payload: dict) -> dict:
    return {"value": object()}


def prints_to_stdout(payload: dict) -> dict:
    print("noise that must not break the protocol")
    return {"ok": True}


def dispatch(payload: dict) -> dict:
    """Call the helper named in the payload, so one batch can mix well-behaved and failing work."""
    return globals()[payload["fn"]](payload)


_LEFT_BEHIND: list = []


def leave_cycle(payload: dict) -> dict:
    """A task that leaves a tensor in unreachable reference-cycle garbage, with automatic collection off."""
    import gc
    import weakref

    import torch

    gc.disable()  # as if the collector had not come round yet when the next task starts
    garbage: dict = {"tensor": torch.zeros(1024)}
    garbage["self"] = garbage
    _LEFT_BEHIND.append(weakref.ref(garbage["tensor"]))
    return {"ok": True}


def left_alive(payload: dict) -> dict:
    return {"alive": sum(ref() is not None for ref in _LEFT_BEHIND), "tracked": len(_LEFT_BEHIND)}


_HELD: list = []


def hold_cycle(payload: dict) -> dict:
    """A task that keeps a reference cycle alive past its end (it gets frozen with the survivors)."""
    import gc
    import weakref

    import torch

    gc.disable()
    kept: dict = {"tensor": torch.zeros(1024)}
    kept["self"] = kept
    _HELD.append(kept)
    _LEFT_BEHIND.append(weakref.ref(kept["tensor"]))
    return {"ok": True}


def drop_cycle(payload: dict) -> dict:
    """A later task drops it: now cyclic garbage among frozen objects."""
    _HELD.clear()
    return {"ok": True}


def count_into(payload: dict) -> dict:
    """Write a growing count into a file every few milliseconds (a worker busy on the host) until the file `until`
    exists, `seconds` at most."""
    import time

    path, deadline, count = payload["path"], time.monotonic() + payload["seconds"], 0
    while time.monotonic() < deadline and not os.path.exists(payload["until"]):
        count += 1
        with open(path + ".tmp", "w") as handle:
            handle.write(str(count))
        os.replace(path + ".tmp", path)
        time.sleep(0.005)
    return {"count": count}


def _write_everywhere(data: bytes) -> None:
    for fd in range(3, 64):
        try:
            os.write(fd, data)
        except OSError:
            pass


def forges_an_answer(payload: dict) -> dict:
    """Writes an answer of its own on every descriptor it has, the worker's channel among them."""
    _write_everywhere(b'{"status": "ok", "value": {"forged": true}}\n')
    return {"forged": False}


def garbles_the_channel(payload: dict) -> dict:
    _write_everywhere(b"not a message\n")
    return {"forged": False}


def imported(payload: dict) -> dict:
    """Which of `payload["modules"]` this worker had imported before the task began."""
    return {name: name in sys.modules for name in payload["modules"]}


_KEPT: list[bytes] = []


def keep_memory(payload: dict) -> dict:
    """Keep `mb` MB of touched memory in the worker after the task (until the worker ends)."""
    _KEPT.append(b"k" * (int(payload["mb"]) * 2**20))
    return {"pid": os.getpid()}


def describe_process(payload: dict) -> dict:
    """What a task can see of the process it runs in: its session, descriptors, arguments, threads and seeds."""
    import random

    import torch

    descriptors = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            descriptors[int(fd)] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return {"pid": os.getpid(), "session": os.getsid(0), "group": os.getpgid(0), "argv0": sys.argv[0],
            "cmdline": open("/proc/self/cmdline").read().split("\0"), "threads": torch.get_num_threads(),
            "random": random.random(), "descriptors": descriptors, "env": os.environ.get(payload.get("env_key", ""))}


def churn_host_memory(payload: dict) -> dict:
    """Allocate and free `rounds` rounds of `mb` MB of 4 MB CPU tensors from the heap, which keeps them once freed;
    the worker's resident memory after. glibc gets there by itself in most workers (it raises both thresholds as
    such blocks are freed), not in all: here both are set."""
    import ctypes

    import torch

    libc = ctypes.CDLL(None)
    libc.mallopt(-3, 64 << 20)   # M_MMAP_THRESHOLD: 4 MB blocks come from the heap
    libc.mallopt(-1, (1 << 31) - 1)   # M_TRIM_THRESHOLD: free()ing them never shrinks it
    for _ in range(payload["rounds"]):
        tensors = [torch.ones(1 << 20) for _ in range(payload["mb"] // 4)]
        del tensors
    return {"rss_mb": _rss_mb()}


def resident(payload: dict) -> dict:
    return {"rss_mb": _rss_mb()}


def _rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20
