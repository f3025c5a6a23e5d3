"""Compiling solutions' C++/CUDA extensions apart from the GPU: before a solution is graded, CPU workers that see no
GPU run its module (whose `load_inline`/`load` calls build the extensions) into builds keyed by the extensions' own
sources; the grading worker then finds each build done and only loads it. A compile error, or a slow compile, never
holds a GPU worker or the GPU's lock."""

from __future__ import annotations

import ast
import functools
import os
import shutil
import sys
import tempfile
from pathlib import Path

from opgen.errors import MachineFault
from opgen.grading.beside_solution import COMPILE_FUNCTION
from opgen.sandbox.faults import first_line
from opgen.sandbox.pool import KeptPools, SandboxPool, SandboxResult, out_of_memory, over_memory_limit

EXTENSIONS_DIR_ENV = "OPGEN_EXTENSIONS_DIR"
KEPT_BUILDS = 256         # builds kept under the extensions folder (the least recently used go first)
COMPILE_MEMORY_MB = 8192  # at least this much resident memory for a compile worker (a compiler and its headers)
_POOLS = KeptPools()


def extensions_root(configured: str | None = None) -> Path:
    """Where extensions are built: `configured`, else $OPGEN_EXTENSIONS_DIR, else a folder in the temp directory."""
    chosen = configured or os.environ.get(EXTENSIONS_DIR_ENV)
    return Path(chosen).expanduser().resolve() if chosen else Path(tempfile.gettempdir()) / "opgen-extensions"


@functools.lru_cache(maxsize=4)
def _arch_list(device: str) -> str | None:
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return os.environ["TORCH_CUDA_ARCH_LIST"]
    if device != "cuda":
        return None
    from opgen.sandbox.gpus import visible_gpu_arch_list

    return visible_gpu_arch_list()


def extension_settings(options) -> dict:
    """What the compile and grading workers share so that the second finds the first's builds: the folder, and on
    CUDA the architectures to build for (the compile worker sees no GPU to ask)."""
    arch = _arch_list(options.device)
    return {"root": str(extensions_root(options.extensions_dir)),
            "env": {"TORCH_CUDA_ARCH_LIST": arch} if arch else {}}


def writable_for(options) -> tuple[str, ...]:
    """What a confined compile or grading worker may write beyond its scratch and caches: the extensions folder
    (an agent's work folder keeps its builds in build/)."""
    return (str(extensions_root(options.extensions_dir)),)


def needs_compile(code: str) -> bool:
    """Whether a solution builds extensions with torch.utils.cpp_extension (Triton kernels compile when launched)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch.utils.cpp_extension"):
            return True
        if isinstance(node, ast.Import) and any(a.name.startswith("torch.utils.cpp_extension") for a in node.names):
            return True
        if isinstance(node, ast.Attribute) and node.attr in ("cpp_extension", "load_inline"):
            return True
        if isinstance(node, ast.Name) and node.id == "load_inline":
            return True
    return False


def _compile_pool(options, jobs: int) -> SandboxPool:
    cores = os.cpu_count() or 2
    workers = max(1, min(jobs, 8, cores // 4))
    memory = max(options.memory_mb, COMPILE_MEMORY_MB) if options.memory_mb else None
    env = {"CUDA_VISIBLE_DEVICES": "", "MAX_JOBS": str(max(1, cores // workers))}   # no GPU: compiling only
    writable = writable_for(options)
    key = (workers, float(options.compile_timeout_s), memory, writable, options.scratch_mb)
    return _POOLS.get(key, lambda: SandboxPool(workers, options.compile_timeout_s, memory, env=env, confined=True,
                                               threads=max(1, cores // workers), writable=writable,
                                               scratch_mb=options.scratch_mb))


def compile_stage(payloads: list[dict], options) -> dict[int, dict]:
    """Compile the extensions of every payload's solution that builds any, on CPU workers. Returns the grade lines of
    those whose compile failed, by index; each payload that compiled gets `compiled` (seconds, extensions built).
    A machine that cannot compile at all (no compiler, no ninja, no CUDA toolkit) raises MachineFault."""
    todo = [i for i, payload in enumerate(payloads)   # `compiled`: already built, by a Ray cluster's compile task
            if needs_compile(payload["solution"]) and "compiled" not in payload]
    if not todo:
        return {}
    jobs = [{"solution": payloads[i]["solution"], "extensions": payloads[i]["extensions"]} for i in todo]
    results = _compile_pool(options, len(todo)).run_many(COMPILE_FUNCTION, jobs)
    failed: dict[int, dict] = {}
    for index, result in zip(todo, results):
        line = _compile_line(result, options.compile_timeout_s)
        if line is None:   # built (or nothing to build), or the module failed otherwise: the grading worker judges it
            value = result.value or {}
            payloads[index]["compiled"] = {"seconds": round(result.seconds, 3), "extensions": value.get("built", []),
                                           "module_error": value.get("detail") if value.get("status") == "deferred"
                                           else None}
        else:
            failed[index] = line
    prune_builds(Path(payloads[todo[0]]["extensions"]["root"]))
    return failed


def _compile_line(result: SandboxResult, limit_s: float) -> dict | None:
    """The grade line of a failed compile, None when the solution may go on to be graded."""
    if result.status == "ok":
        status, detail = result.value.get("status"), result.value.get("detail") or ""
        if status == "machine":   # the solution's error names a missing tool: the machine's fault if one is missing
            missing = missing_build_tool(detail)
            if missing:
                raise MachineFault(f"extensions cannot be compiled here ({missing}): {first_line(detail)}")
            return {"correct": False, "reason": "compile_error", "detail": detail}
        if status == "compile_error":
            return {"correct": False, "reason": "compile_error", "detail": detail}
        return None   # built, nothing to build, or an error that is not the compiler's: the grading worker judges it
    if result.status == "timeout":
        return {"correct": False, "reason": "compile_error",
                "detail": f"compiling took longer than the limit of {limit_s:.0f} s"}
    if over_memory_limit(result) or out_of_memory(result, "detail"):
        return {"correct": False, "reason": "out_of_memory", "detail": f"while compiling: {result.detail[-1500:]}"}
    reason = "crash" if result.status == "crash" else "exec_error"
    return {"correct": False, "reason": reason, "detail": f"while compiling: {result.detail[-1500:]}"}


def build_path() -> str:
    """PATH for the build tools: the interpreter's own bin folder first, where `pip install ninja` puts ninja."""
    return os.pathsep.join(part for part in (str(Path(sys.executable).parent), os.environ.get("PATH")) if part)


def missing_build_tool(detail: str) -> str | None:
    """What this machine lacks to build the extension that failed with `detail` (ninja, the C++ compiler, the CUDA
    toolkit), or None when it has them all (then the error is the solution's)."""
    if not shutil.which("ninja", path=build_path()):
        return "no ninja on PATH (pip install ninja)"
    compiler = os.environ.get("CXX", "c++")
    if not shutil.which(compiler, path=build_path()):
        return f"no C++ compiler {compiler!r} on PATH"
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    if "CUDA_HOME" in detail and not shutil.which("nvcc") and not Path(cuda_home, "bin", "nvcc").exists():
        return "no CUDA toolkit (nvcc): set CUDA_HOME"
    return None


def prune_builds(root: Path, keep: int = KEPT_BUILDS) -> None:
    """Remove all but the `keep` most recently used builds under `root` (a training run compiles thousands)."""
    try:
        builds = sorted((path for path in root.iterdir() if path.is_dir()), key=lambda p: p.stat().st_mtime)
    except OSError:
        return
    for stale in builds[:-keep] if len(builds) > keep else []:
        shutil.rmtree(stale, ignore_errors=True)
