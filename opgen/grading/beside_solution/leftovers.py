"""What a solution may leave running in its grading worker for the grades after it: threads, interval timers and
signal handlers. The signals are held back while the grader compares (a handler run there runs the solution's code
where no guard looks); after the grade, timers are stopped, handlers put back, and a worker left with any of them
(or with a thread, which cannot be stopped) runs no other grade."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

TIMERS = tuple(getattr(signal, name) for name in ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF")
               if hasattr(signal, name))
# Signals a handler could be armed for; those the kernel raises for the running code itself are left alone.
_SYNCHRONOUS = {getattr(signal, name) for name in ("SIGKILL", "SIGSTOP", "SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL",
                                                   "SIGABRT", "SIGTRAP", "SIGSYS") if hasattr(signal, name)}
ASYNCHRONOUS = frozenset(signal.valid_signals()) - _SYNCHRONOUS if hasattr(signal, "valid_signals") else frozenset()


class Baseline:
    """The threads and signal handlers of the worker before a grade, to tell what the grade left."""

    def __init__(self) -> None:
        self.threads = set(threading.enumerate())
        self.idents = set(sys._current_frames())   # every Python thread, those `_thread` started included
        self.timers = {timer for timer in TIMERS if signal.getitimer(timer) != (0.0, 0.0)}
        self.handlers = {number: _handler(number) for number in ASYNCHRONOUS}

    def running(self, solution_file: str, known: set[int] | None = None, unlisted: bool = True) -> list[str]:
        """What the solution left running that did not run before, in words, left as it is: interval timers,
        changed signal handlers, and new threads that run its code (a library's own thread, such as a progress
        bar's monitor that torch.compile starts, is not the solution's); with `unlisted`, those `threading` does not
        list too, `known` the ones to count as old (default: this baseline's)."""
        left = ["an interval timer" for timer in TIMERS
                if timer not in self.timers and signal.getitimer(timer) != (0.0, 0.0)]
        left += [f"a handler of {signal.Signals(number).name}" for number, before in self.handlers.items()
                 if before is not None and _handler(number) is not before]
        new = [thread for thread in threading.enumerate() if thread not in self.threads and thread.is_alive()]
        frames = sys._current_frames()
        left += [f"thread {thread.name!r}" for thread in new if _runs_code_of(thread, frames, solution_file)]
        left += [f"a thread started without `threading` ({ident})" for ident in
                 (self.unlisted(frames, known) if unlisted else ()) if _stack_runs(frames[ident], solution_file)]
        return left

    def unlisted(self, frames: dict, known: set[int] | None = None) -> list[int]:
        """New threads that `threading` does not list (started with `_thread.start_new_thread`)."""
        listed, known = {thread.ident for thread in threading.enumerate()}, self.idents if known is None else known
        return [ident for ident in frames if ident not in known and ident not in listed]

    def clean_up(self, unlisted: bool = True) -> list[str]:
        """Stop the timers, put the handlers back; what was left, in words (empty: nothing); with `unlisted`, the
        threads `threading` does not list too."""
        left = []
        for timer in TIMERS:
            if signal.getitimer(timer) != (0.0, 0.0):
                signal.setitimer(timer, 0)
                left.append("an interval timer")
        for number, before in self.handlers.items():
            if before is not None and _handler(number) is not before:
                with contextlib.suppress(OSError, ValueError, TypeError):
                    signal.signal(number, before)
                left.append(f"a handler of {signal.Signals(number).name}")
        threads = [thread.name for thread in threading.enumerate() if thread not in self.threads and thread.is_alive()]
        left += [f"thread {name!r}" for name in threads]
        if unlisted:
            left += [f"a thread started without `threading` ({ident})" for ident in self.unlisted(sys._current_frames())]
        return left


def _runs_code_of(thread: threading.Thread, frames: dict, solution_file: str) -> bool:
    """Whether a thread runs code of `solution_file` now, or will: its stack, its target (a timer's function), or
    its class's run method."""
    for function in (getattr(thread, "_target", None), getattr(thread, "function", None), type(thread).run):
        code = getattr(getattr(function, "__func__", function), "__code__", None)
        if code is not None and code.co_filename == solution_file:
            return True
    return _stack_runs(frames.get(thread.ident), solution_file)


def _stack_runs(frame, solution_file: str) -> bool:
    while frame is not None:
        if frame.f_code.co_filename == solution_file:
            return True
        frame = frame.f_back
    return False


def _handler(number: int):
    with contextlib.suppress(OSError, ValueError):
        return signal.getsignal(number)
    return None


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """The asynchronous signals held back inside (delivered, and their handlers run, on the way out)."""
    if not ASYNCHRONOUS or threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, ASYNCHRONOUS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
