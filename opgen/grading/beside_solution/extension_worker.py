"""Inside sandbox workers: extension builds keyed by their sources (`keyed_builds`, used by the compile and the
grading workers alike, so the second finds the first's build), and the compile job itself (`compile_in_worker`)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

BUILD_ERROR = "Error building extension"
# Errors of the machine, not of the solution's code: no build tool, no CUDA toolkit, no compiler.
MACHINE_ERRORS = ("Ninja is required", "CUDA_HOME environment variable is not set", "command not found",
                  ": not found")
# Arguments that do not change what is built.
UNKEYED = frozenset({"verbose", "build_directory", "keep_intermediates"})


class Builds:
    """The extensions built or loaded while keyed builds were on: (name, key) of each."""

    def __init__(self) -> None:
        self.built: list[dict] = []


def _key(function: Callable, arguments: dict) -> str:
    """A digest of what an extension is: its name, sources (file contents for `load`), flags, and the torch, CUDA and
    Python it is built for."""
    import torch

    material = {name: value for name, value in arguments.items() if name not in UNKEYED}
    if function.__name__ == "load":
        sources = material.get("sources")
        paths = [sources] if isinstance(sources, str) else list(sources or [])
        material["sources"] = [hashlib.sha256(Path(path).read_bytes()).hexdigest() for path in paths]
    material["_for"] = [torch.__version__, torch.version.cuda, sys.version_info[:2], function.__name__]
    text = json.dumps(material, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _keyed(function: Callable, root: Path, builds: Builds) -> Callable:
    signature = inspect.signature(function)

    @functools.wraps(function)
    def keyed(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        if bound.arguments.get("build_directory") is None:
            key = _key(function, dict(bound.arguments))
            folder = root / key
            folder.mkdir(parents=True, exist_ok=True)
            os.utime(folder)   # the most recently used builds are kept
            bound.arguments["build_directory"] = str(folder)
            builds.built.append({"name": bound.arguments.get("name"), "key": key})
        return function(*bound.args, **bound.kwargs)

    return keyed


@contextlib.contextmanager
def keyed_builds(settings: dict | None) -> Iterator[Builds]:
    """While inside, `torch.utils.cpp_extension.load_inline` and `load` build into `<root>/<key>`, the key a digest of
    the extension's sources and flags, so any process building the same extension finds the same build, and two
    solutions that name different extensions alike never share one. The settings' environment (the CUDA
    architectures) is applied, and the extension builder's per-process version counter starts afresh, so a build
    is named the same in every process."""
    builds = Builds()
    if not settings:
        yield builds
        return
    from torch.utils import cpp_extension

    root = Path(settings["root"])
    saved_env = {name: os.environ.get(name) for name in settings.get("env", {})}
    saved = {name: getattr(cpp_extension, name) for name in ("load_inline", "load")}
    os.environ.update(settings.get("env", {}))
    cpp_extension.JIT_EXTENSION_VERSIONER.entries.clear()
    for name, function in saved.items():
        setattr(cpp_extension, name, _keyed(function, root, builds))
    try:
        yield builds
    finally:
        for name, function in saved.items():
            setattr(cpp_extension, name, function)
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def compiler_output(message: str) -> str:
    """The compiler's messages from a build error, without the long command lines, at most 3,000 characters."""
    lines = [line for line in message.splitlines()
             if not line.lstrip().startswith(("[", "c++ ", "g++ ", "nvcc ", "ninja: build stopped"))
             and " -MMD " not in line and " -isystem " not in line]
    text = "\n".join(line for line in lines if line.strip())
    return text[:3000]


def compile_in_worker(payload: dict) -> dict:
    """Run the solution's module on this CPU worker (no GPU visible), so its `load_inline`/`load` calls build its
    extensions; `status` ok (built: the extensions), compile_error (the compiler's messages), machine (the machine
    cannot compile), or deferred (the module failed otherwise: the grading worker judges it)."""
    from opgen.grading.beside_solution.solution import solution_namespace
    from opgen.sandbox.task import describe

    started = time.perf_counter()
    with keyed_builds(payload.get("extensions")) as builds:
        try:
            solution_namespace(payload["solution"])
        except BaseException as error:  # noqa: BLE001 - whatever the module raises is reported, never raised
            text = str(error)
            if any(marker in text for marker in MACHINE_ERRORS):
                return {"status": "machine", "detail": text[:2000]}
            if BUILD_ERROR in text:
                return {"status": "compile_error", "detail": compiler_output(text)}
            return {"status": "deferred", "detail": describe(error), "built": builds.built}
    return {"status": "ok", "built": builds.built, "seconds": round(time.perf_counter() - started, 3)}
