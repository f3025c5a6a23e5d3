"""What CUDA does inside a confined worker, piece by piece: for the whole confinement, for each piece alone
(opgen/sandbox/confine.py, PIECES) and for none, a confined worker starts CUDA, multiplies on the GPU, runs a Triton
kernel through torch.compile and times with CUDA events; and, confined, tries each door (signal the grader, open a
socket, read the grader's environ, write outside its scratch). One line a variant, as JSON, then a summary of which
pieces CUDA cannot start beside.

    python -m scripts.gpu.confinement_probe [--out FILE] [--device cuda|cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

from opgen.sandbox.confine import PIECES, SKIP_ENV
from opgen.sandbox.gpus import gpu_slot_envs
from opgen.sandbox.pool import SandboxPool

STEP_S = 240.0


def _step(steps: dict, name: str, action) -> None:
    started = time.perf_counter()
    try:
        value = action()
        steps[name] = {"ok": True, "value": value, "s": round(time.perf_counter() - started, 2)}
    except BaseException as error:  # noqa: BLE001 - every failure is the probe's finding
        text = str(error).strip().splitlines()
        steps[name] = {"ok": False, "error": f"{type(error).__name__}: {text[0][:300] if text else ''}",
                       "s": round(time.perf_counter() - started, 2)}


def _refused(action) -> str:
    try:
        action()
        return "allowed"
    except PermissionError:
        return "refused"
    except OSError as error:
        return f"failed: {error}"


def probe(payload: dict) -> dict:
    """Inside a (confined) worker: CUDA's steps and the doors."""
    device = payload["device"]
    steps: dict = {}
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    steps["process"] = {key: fields[key].strip() for key in ("Seccomp", "NoNewPrivs", "CapEff") if key in fields}
    _step(steps, "import torch", lambda: __import__("torch").__version__)
    import torch

    if device == "cuda":
        _step(steps, "cuda init", lambda: (torch.cuda.init(), torch.cuda.get_device_name())[1])
    _step(steps, "matmul", lambda: float((torch.ones(64, 64, device=device) @ torch.ones(64, 64, device=device))
                                         .sum().item()))
    _step(steps, "torch.compile", lambda: float(torch.compile(lambda x: torch.sin(x) * 2)(
        torch.ones(4096, device=device)).sum().item()))
    if device == "cuda":
        def events() -> float:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.ones(1 << 20, device="cuda").mul_(2)
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end)

        _step(steps, "cuda events", events)
    import socket

    grader = payload["grader"]
    planted = os.path.join(payload["cwd"], f".confinement-probe-{os.getpid()}")
    steps["doors"] = {
        "signal the grader": _refused(lambda: os.kill(grader, 0)),
        "signal the parent": _refused(lambda: os.kill(os.getppid(), 0)),
        "tcp socket": _refused(lambda: socket.socket(socket.AF_INET).close()),
        "the grader's environ": _refused(lambda: open(f"/proc/{grader}/environ", "rb").read(1)),
        "write the grader's folder": _refused(lambda: (open(planted, "w").close(), os.unlink(planted))),
        "write its temporary folder": _refused(lambda: open(os.path.join(__import__("tempfile").gettempdir(),
                                                                          "probe"), "w").close()),
    }
    return steps


def variants() -> list[tuple[str, set[str] | None]]:
    """(name, pieces left out; None: not confined at all)."""
    return [("all", set()), ("none", None)] + [(f"only {piece}", set(PIECES) - {piece}) for piece in PIECES]


def run_variant(name: str, skip: set[str] | None, device: str, results: dict) -> None:
    saved = os.environ.get(SKIP_ENV)
    if skip:
        os.environ[SKIP_ENV] = ",".join(sorted(skip))
    try:
        pool = SandboxPool(1, STEP_S, None, confined=skip is not None, slot_envs=gpu_slot_envs(device))
    finally:
        os.environ.pop(SKIP_ENV, None)
        if saved is not None:
            os.environ[SKIP_ENV] = saved
    started = time.perf_counter()
    try:
        with pool:
            [result] = pool.run_many("scripts.gpu.confinement_probe:probe", [{"device": device, "grader": os.getpid(),
                                                           "cwd": os.getcwd()}])
        results[name] = {"status": result.status, "steps": result.value,
                         "detail": result.detail[-1500:] if result.status != "ok" else "",
                         "s": round(time.perf_counter() - started, 1)}
    except Exception as error:  # noqa: BLE001 - a worker that cannot start is a finding too
        results[name] = {"status": "pool error", "detail": f"{type(error).__name__}: {error}"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    results: dict = {}
    threads = [threading.Thread(target=run_variant, args=(name, skip, args.device, results))
               for name, skip in variants()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failing = []
    for name, _ in variants():
        result = results.get(name, {})
        steps = result.get("steps") or {}
        broken = [step for step, value in steps.items() if isinstance(value, dict) and value.get("ok") is False]
        if result.get("status") != "ok" or broken:
            failing.append(name)
        print(json.dumps({"variant": name, **result}), flush=True)
    print(f"variants where a CUDA step failed: {failing or 'none'}")
    if args.out:
        with open(args.out, "w") as out:
            json.dump(results, out, indent=1)
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
