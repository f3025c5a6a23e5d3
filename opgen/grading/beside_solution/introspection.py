"""The routes from a solution's code into the grader's objects, seen as they are taken: an audit hook (installed once
a worker, before the first solution loads; it cannot be removed) notes the first frame, garbage-collector, tracing,
code-object or ctypes event raised directly by the solution's code, where the static scan did not see the name
(`getattr(torch, "s" + "ys")._getframe`), and refuses it (the call raises PermissionError): the grade then ends in
`tampering`. An event raised by a library the solution calls (a warning's `sys._getframe`, `torch.compile`'s own)
is not the solution's, unless the library's function only hands the solution its caller's frame.
`opgen/grading/beside_solution/integrity.py` finds what a route this misses changed."""

from __future__ import annotations

import inspect
import logging
import sys
import threading
import traceback
import types

from opgen.sandbox.task import TASK_FILENAME_PREFIX

# Events that hand out frames (and the grader's locals with them), every object of the process, or run code where
# the grader runs: none of them is needed to write a kernel.
WATCHED = frozenset({
    "sys._getframe", "sys._getframemodulename", "sys._current_frames", "sys._current_exceptions", "sys.settrace",
    "sys.setprofile", "sys.addaudithook", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "exec", "compile",
    "code.__new__", "function.__new__", "object.__getattr__", "object.__setattr__", "object.__delattr__",
})
WATCHED_PREFIXES = ("ctypes.",)
# Library modules whose functions are the frame API itself (logging's `currentframe` is sys._getframe): the solution
# calling them is the solution taking a frame.
_FRAME_API_FILES = frozenset({inspect.__file__, traceback.__file__, logging.__file__})
# Library modules with functions that take their caller's frame and hand back its locals (TorchScript's resolution
# callbacks), or that call a function they are given and hand back what it returns (pytree's `tree_map` calling
# sys._getframe or gc.get_objects): called by the solution, what they take is the solution's taking.
_FRAME_HANDING_SUFFIXES = ("torch/_jit_internal.py", "torch/utils/_pytree.py", "torch/utils/_cxx_pytree.py")
SOLUTION_MODULE = "opgen_solution"   # the __name__ the solution's module runs under (opgen/grading/beside_solution/solution.py)
SOLUTION_FILENAME = f"{TASK_FILENAME_PREFIX}solution>"   # ... and the file every code object of it carries


class Watch:
    """The hook's state: armed while a grade has a solution loaded, and the first event the solution raised. The
    hook itself (`install`) is a closure: no name of any module leads to its code, its helpers or its flag."""

    def __init__(self) -> None:
        self.solution_file: str | None = None
        self.found: str | None = None

    def arm(self, solution_file: str) -> None:
        self.solution_file, self.found = solution_file, None

    def disarm(self) -> None:
        self.solution_file = None

    def problem(self, solution_file: str) -> str | None:
        """The first route the solution took, or that the watch was disarmed (or moved) while it ran."""
        if self.found is None and self.solution_file != solution_file:
            return "the grader's watch for routes into its objects was disarmed"
        return self.found


def _hook(watch: Watch):
    """The audit hook of `watch`. What it calls is bound here, when it is made, before any solution loads: a
    solution that replaces a module's helper, or sets the flag that stops the hook's own frame lookup from
    re-entering it, changes nothing the hook runs."""
    inside = threading.local()   # the hook's own sys._getframe raises an event too
    getframe, raised_by, own_class, describe = sys._getframe, _raised_by, _own_class, _describe

    def hook(event: str, args: tuple) -> None:
        if watch.solution_file is None:
            return
        if event not in WATCHED and not event.startswith(WATCHED_PREFIXES):
            return
        if getattr(inside, "value", False):
            return
        inside.value = True
        try:
            if event in ("object.__setattr__", "object.__delattr__") and own_class(args):
                return
            taken = raised_by(getframe(1), watch.solution_file)
        finally:
            inside.value = False
        if taken:   # refused, not only noted (every time: a solution may catch the error and try again)
            if watch.found is None:
                watch.found = f"the solution's code took {describe(event, args)}, a route into the grader's objects"
            raise PermissionError(f"opgen's grader refuses {event} to a solution")

    return hook


def _raised_by(frame: types.FrameType | None, solution_file: str) -> bool:
    """Whether the nearest frame outside the frame API's modules, and past a frame-handing function's, is the
    solution's."""
    while frame is not None and frame.f_code.co_filename in _FRAME_API_FILES:
        frame = frame.f_back
    while frame is not None and frame.f_code.co_filename.endswith(_FRAME_HANDING_SUFFIXES):
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename == solution_file


def _own_class(args: tuple) -> bool:
    """An attribute set on a class the solution defined (its own class attribute), not on anything else."""
    target = args[0] if args else None
    return isinstance(target, type) and target.__module__ == SOLUTION_MODULE


def _describe(event: str, args: tuple) -> str:
    if event.startswith("object.") and len(args) >= 2:
        return f"{event} ({type(args[0]).__name__}.{args[1]})"
    return event


WATCH = Watch()
_installed = False


def install() -> Watch:
    """The process's watch, its audit hook installed on the first call."""
    global _installed
    if not _installed:
        sys.addaudithook(_hook(WATCH))
        _installed = True
    return WATCH
