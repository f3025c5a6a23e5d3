"""The sandbox worker process: reads one JSON request per line, calls `module:function(payload)`, answers in JSON."""

from __future__ import annotations

import ctypes
import faulthandler
import functools
import gc
import importlib
import json
import os
import resource
import sys
import tempfile
import traceback
from collections.abc import Callable

from opgen.sandbox.confine import CONFINE_ENV, confine_if_asked, skipped_pieces
from opgen.sandbox.keeper import split
from opgen.sandbox.landlock import SCRATCH_ENV

SYS_PATH_ENV = "OPGEN_SANDBOX_SYS_PATH"
# `module:function` a worker runs once it has said it is ready and before it reads its first request: the imports
# and set-up its tasks need, made while a pool started ahead of its first task would otherwise wait
WARM_UP_ENV = "OPGEN_SANDBOX_WARM_UP"


def _protocol_streams():
    """Keep private copies of stdin/stdout for the protocol; task code sees /dev/null and stderr instead."""
    proto_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    proto_out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)  # prints of task code land in the worker's stderr log, never in the protocol
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    return proto_in, proto_out


def resolve(fn_path: str) -> Callable[[dict], dict]:
    """Import "package.module:function" and return the function."""
    module_name, _, function_name = fn_path.partition(":")
    if not function_name:
        raise ValueError(f"function path must be 'package.module:function', got {fn_path!r}")
    return getattr(importlib.import_module(module_name), function_name)


def json_codec() -> tuple[Callable[[object], str], Callable[[str], object]]:
    """`encode(message)`, the JSON text of an answer, and `decode(line)`, the message of a request line, by the C
    encoder and scanner made now, before any task runs. `main` holds them in its own frame, so a task that patches
    `json` (its functions, its default encoder, its classes) or this module's names changes neither what the worker
    answers (a verdict rewritten to "correct") nor what it reads next."""
    import _json

    def unknown(value: object) -> object:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")

    make = _json.make_encoder(None, unknown, _json.encode_basestring_ascii, None, ": ", ", ", False, False, True)
    scan, join = json.JSONDecoder().scan_once, "".join
    return (lambda message: join(make(message, 0))), (lambda line: scan(line, 0)[0])


def _answer(stream, encode: Callable[[object], str], message: dict) -> None:
    try:
        text = encode(message)
    except (TypeError, ValueError) as error:
        kept = {key: message[key] for key in ("nonce", "exiting", "cpu_s") if key in message}
        text = encode({"status": "error", "detail": f"result is not JSON-serialisable: {error}", **kept})
    stream.write(text + "\n")
    stream.flush()


_exit_after_answer = False


def exit_after_answer() -> None:
    """Have this worker exit once the current task has its answer, so the pool's next task gets a fresh process
    (a task that changed the process in ways a later task must not inherit)."""
    global _exit_after_answer
    _exit_after_answer = True


def _exit_requested() -> bool:
    # the worker runs as __main__; a task calls exit_after_answer of the module imported by its own name
    imported = sys.modules.get("opgen.sandbox.worker")
    return _exit_after_answer or bool(getattr(imported, "_exit_after_answer", False))


FULL_COLLECTION_EVERY = 16  # tasks between collections that also look at frozen objects
_tasks_since_full_collection = 0


def release_torch() -> None:
    """Free what the last task left behind: its compiled graphs (dynamo's caches hold the model and its
    weights), unreachable objects, then the CUDA caching allocator's blocks, so an idle worker holds no
    GPU memory that the next task, or another worker on the same GPU, needs.

    A full collection with torch loaded takes ~0.2 s, so what survives it is frozen (`gc.freeze`) and the
    next collections scan only newer objects; every FULL_COLLECTION_EVERY tasks the frozen objects are
    collected too, in case one of them became garbage since.
    """
    global _tasks_since_full_collection
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        if "torch._dynamo" in sys.modules:
            torch._dynamo.reset()
        if os.environ.get(SCRATCH_ENV):
            _forget_inductor_files()
        _tasks_since_full_collection += 1
        if _tasks_since_full_collection >= FULL_COLLECTION_EVERY:
            gc.unfreeze()
            _tasks_since_full_collection = 0
        gc.collect()
        gc.freeze()
        _return_freed_heap()
        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001 - a broken CUDA context is found below
        pass
    _exit_if_cuda_context_broken(torch)


def _forget_inductor_files() -> None:
    """The pool empties a confined worker's scratch after every task, inductor's caches with it: what inductor
    remembers of their files (the C++ prefix header, the precompiled headers it builds once a process) goes too, or
    the next task's compile includes a file that is gone."""
    utils, codecache = sys.modules.get("torch._inductor.utils"), sys.modules.get("torch._inductor.codecache")
    if utils is not None and hasattr(utils, "clear_caches"):
        utils.clear_caches()
    precompiled = getattr(codecache, "_precompile_header", None)
    if precompiled is not None and hasattr(precompiled, "cache_clear"):
        precompiled.cache_clear()


def _return_freed_heap() -> None:
    """Give the heap's free memory back to the system (glibc's malloc_trim). glibc raises its mmap threshold as
    large blocks are freed, so later tensors of a few MB come from the heap, which keeps them once freed; in a kept
    worker that memory would count against the pool's resident limit during the next task."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim():
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):   # not glibc: nothing to trim
        return None
    trim.argtypes = [ctypes.c_size_t]
    return trim


def _exit_if_cuda_context_broken(torch) -> None:
    """A sticky CUDA error (a task's device-side assert, an illegal memory access) breaks every later CUDA call of
    this process: exit, once the task that caused it has its answer, so that the pool starts a fresh worker and the
    next task is not failed by its predecessor's error."""
    try:
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 - any error here means the context is unusable
        os._exit(70)


def cpu_seconds() -> float:
    """CPU seconds (user and system) of this process and of its children that have ended."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _warm_up(target: str | None) -> None:
    """Run the pool's warm-up function, if any. A first task sent meanwhile waits in the pipe, on its own clock, as it
    would have waited for the same imports; a warm-up that fails leaves its failure for the task to meet."""
    if not target:
        return
    try:
        resolve(target)()
    except Exception:  # noqa: BLE001 - the task that needs what failed reports it
        pass


def _reap_children() -> None:
    """Reap this worker's children that have ended (a task's processes, ended by the pool after its answer)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _enter_scratch() -> None:
    """A worker with a scratch folder of its own works in it: its temporary folder (read again from TMPDIR, which a
    forked worker's zygote had read before) and its current folder."""
    if os.environ.get(SCRATCH_ENV):
        tempfile.tempdir = None
        os.chdir(tempfile.gettempdir())


def main() -> None:
    faulthandler.enable()  # a segfault leaves a Python traceback in the stderr log
    # a confined worker first splits off its keeper: every process its tasks start ends with it (keeper.py)
    kept = split() if os.environ.get(CONFINE_ENV) == "1" and "processes" not in skipped_pieces() else False
    extra_path = json.loads(os.environ.get(SYS_PATH_ENV, "[]"))
    sys.path[:0] = [p for p in extra_path if p not in sys.path]
    proto_in, proto_out = _protocol_streams()
    encode, decode = json_codec()
    # bound now, in this frame: see json_codec
    answer = functools.partial(_answer, proto_out, encode)
    exit_requested, release, reap = _exit_requested, release_torch, _reap_children
    _enter_scratch()
    # before any task code: a solution may not signal the grader or its neighbours, reach the network, read the
    # user's files, write outside its scratch, or leave a process behind
    confinement = {**confine_if_asked(), "processes": kept}
    answer({"status": "ready", "pid": os.getpid(), "confined": confinement["signals"],
                        "writes_confined": confinement["writes"], "confinement": confinement})
    _warm_up(os.environ.get(WARM_UP_ENV))
    for line in proto_in:
        request = decode(line)
        nonce = request.pop("nonce", None)   # the answer carries it: the pool refuses one written by task code
        try:
            function = resolve(request["fn"])
        except BaseException:  # noqa: BLE001 - any import failure is reported, the worker lives on
            answer({"status": "error", "detail": traceback.format_exc(limit=5), "nonce": nonce})
            continue
        answer({"status": "started"})
        cpu = cpu_seconds()  # every answer says how much CPU its task took: is a slow task working or waiting?
        try:
            value = function(request["payload"])
            message = {"status": "ok", "value": value, "cpu_s": cpu_seconds() - cpu}
        except BaseException:  # noqa: BLE001 - SystemExit from task code is an error, not our exit
            message = {"status": "error", "detail": traceback.format_exc(limit=8), "cpu_s": cpu_seconds() - cpu}
        exiting = exit_requested()
        message["nonce"] = nonce
        answer({**message, "exiting": True} if exiting else message)   # the pool sends it nothing more
        if exiting:
            os._exit(0)
        value = None
        release()
        reap()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--zygote"]:   # opgen/sandbox/zygote.py: returns only in a forked worker
        from opgen.sandbox.zygote import serve

        serve(int(sys.argv[2]))
    main()
