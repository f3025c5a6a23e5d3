"""What CUDA does inside a confined worker, piece by piece. Two kinds of variant, all run at once, one JSON line each,
then a summary of the variants where a CUDA step failed:

- a worker of a confined pool (the real path: its scratch, allow-listed environment and keeper), with the whole
  confinement ("all"), none ("none") or one piece ("pool only reads");
- a worker of an unconfined pool that confines itself with the pieces and settings the variant names
  (opgen/sandbox/confine.py's `confine`) before any CUDA call: each piece alone, and the network's with `connect`
  answered EPERM (the answer CUDA's start met, beside a refused `bind`, when it failed).

In each, the worker starts CUDA, multiplies on the GPU, times with CUDA events and (where the variant says) runs a
Triton kernel through torch.compile; then tries each door (signal the grader, open a socket, read the grader's
environ, write outside its scratch).

    python -m scripts.gpu.confinement_probe [--out FILE] [--device cuda|cpu] [--only NAME ...]
    python -m scripts.gpu.confinement_probe --inline NAME   # one self-confining variant, in this process, without
                                                            # torch.compile (for strace: scripts/gpu/confinement_trace.sh)
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import tempfile
import threading
import time

from opgen.sandbox.confine import CONNECT_ERRNO, PIECES, SKIP_ENV
from opgen.sandbox.gpus import gpu_slot_envs
from opgen.sandbox.landlock import SCRATCH_ENV
from opgen.sandbox.pool import SandboxPool
from opgen.sandbox.scratch import make_scratch, scratch_environment
from opgen.sandbox.zygote import paths_read_again

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


def _confine_here(apply: dict) -> dict:
    """Confine this process as the variant says, in a scratch folder of its own (as a confined pool's worker)."""
    from opgen.sandbox.confine import confine

    scratch = make_scratch()
    os.environ.update({**scratch_environment(scratch), SCRATCH_ENV: str(scratch)})
    paths_read_again()   # as a confined pool's worker does: the temporary folder and inductor's, in the scratch
    return confine(set(apply["pieces"]), file_mb=4096, connect_errno=apply.get("connect_errno", CONNECT_ERRNO))


def probe(payload: dict) -> dict:
    """Inside a worker: confine it first where the variant says, then CUDA's steps and the doors."""
    device = payload["device"]
    steps: dict = {}
    if payload.get("apply"):
        steps["held"] = _confine_here(payload["apply"])
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    steps["process"] = {key: fields[key].strip() for key in ("Seccomp", "NoNewPrivs", "CapEff") if key in fields}
    _step(steps, "import torch", lambda: __import__("torch").__version__)
    import torch

    if device == "cuda":
        _step(steps, "cuda init", lambda: (torch.cuda.init(), torch.cuda.get_device_name())[1])
    _step(steps, "matmul", lambda: float((torch.ones(64, 64, device=device) @ torch.ones(64, 64, device=device))
                                         .sum().item()))
    if device == "cuda":
        def events() -> float:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.ones(1 << 20, device="cuda").mul_(2)
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end)

        _step(steps, "cuda events", events)
    if payload.get("compile", True):
        _step(steps, "torch.compile", lambda: float(torch.compile(lambda x: torch.sin(x) * 2)(
            torch.ones(4096, device=device)).sum().item()))
    import socket

    grader = payload["grader"]
    planted = os.path.join(payload["cwd"], f".confinement-probe-{os.getpid()}")
    steps["doors"] = {
        "signal the grader": _refused(lambda: os.kill(grader, 0)),
        "tcp socket": _refused(lambda: socket.socket(socket.AF_INET).close()),
        "the grader's environ": _refused(lambda: open(f"/proc/{grader}/environ", "rb").read(1)),
        "write the grader's folder": _refused(lambda: (open(planted, "w").close(), os.unlink(planted))),
        "write its temporary folder": _refused(lambda: open(os.path.join(tempfile.gettempdir(), "probe"), "w")
                                               .close()),
    }
    return steps


def variants() -> dict[str, dict]:
    """name: {"skip": pieces a confined pool leaves out (None: an unconfined pool)} or {"apply": what a worker of an
    unconfined pool confines itself with, "compile": whether it runs torch.compile too}."""
    found = {"all": {"skip": set()}, "none": {"skip": None}, "pool only reads": {"skip": set(PIECES) - {"reads"}}}
    for piece in PIECES:
        if piece != "processes":   # the keeper is a confined pool's alone ("all")
            found[piece] = {"apply": {"pieces": [piece]}, "compile": piece in ("reads", "writes")}
    found["network, connect EPERM"] = {"apply": {"pieces": ["network"], "connect_errno": errno.EPERM}}
    return found


def _pool(variant: dict, device: str) -> SandboxPool:
    """The variant's pool, its environment read now (the skipped pieces travel in this process's environment)."""
    skip = variant.get("skip")
    saved = os.environ.pop(SKIP_ENV, None)
    if skip:
        os.environ[SKIP_ENV] = ",".join(sorted(skip))
    try:
        return SandboxPool(1, STEP_S, None, confined="skip" in variant and skip is not None,
                           slot_envs=gpu_slot_envs(device))
    finally:
        os.environ.pop(SKIP_ENV, None)
        if saved is not None:
            os.environ[SKIP_ENV] = saved


def _payload(variant: dict, device: str) -> dict:
    return {"device": device, "grader": os.getpid(), "cwd": os.getcwd(), "apply": variant.get("apply"),
            "compile": variant.get("compile", True)}


def run_variant(name: str, pool: SandboxPool, payload: dict, results: dict) -> None:
    started = time.perf_counter()
    try:
        with pool:
            [result] = pool.run_many("scripts.gpu.confinement_probe:probe", [payload])
        results[name] = {"status": result.status, "steps": result.value,
                         "detail": result.detail[-1500:] if result.status != "ok" else "",
                         "s": round(time.perf_counter() - started, 1)}
    except Exception as error:  # noqa: BLE001 - a worker that cannot start is a finding too
        results[name] = {"status": "pool error", "detail": f"{type(error).__name__}: {error}"}


def failed_steps(result: dict) -> list[str]:
    steps = result.get("steps") or {}
    return [step for step, value in steps.items() if isinstance(value, dict) and value.get("ok") is False]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--only", action="append", help="a variant to run (again for more; default: all)")
    parser.add_argument("--inline", help="run this self-confining variant in this process")
    args = parser.parse_args()
    chosen = variants()
    if args.inline:
        steps = probe({**_payload(chosen[args.inline], args.device), "compile": False})
        print(json.dumps({"variant": args.inline, "steps": steps}), flush=True)
        return 1 if failed_steps({"steps": steps}) else 0
    if args.only:
        chosen = {name: chosen[name] for name in args.only}
    results: dict = {}
    # the pools first, one after another: each reads the environment as it is made
    pools = {name: _pool(variant, args.device) for name, variant in chosen.items()}
    threads = [threading.Thread(target=run_variant, args=(name, pools[name], _payload(variant, args.device), results))
               for name, variant in chosen.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failing = []
    for name in chosen:
        result = results.get(name, {})
        if result.get("status") != "ok" or failed_steps(result):
            failing.append(name)
        print(json.dumps({"variant": name, **result}), flush=True)
    print(f"variants where a CUDA step failed: {failing or 'none'}")
    if args.out:
        with open(args.out, "w") as out:
            json.dump(results, out, indent=1)
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
