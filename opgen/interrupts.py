"""Ctrl-C belongs to the command alone: the pool processes it starts never see it, a first one stops the command (which
keeps what it finished), and a later one ends the process at once, quietly."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator

INTERRUPTED = 130   # the exit status of a command stopped by Ctrl-C (128 + SIGINT), as shells report it


@contextlib.contextmanager
def spared_children() -> Iterator[None]:
    """Processes started inside (from the calling thread) begin with SIGINT blocked, and keep it blocked: the
    terminal sends Ctrl-C to its whole foreground group, and a pool worker that got it would print a traceback of
    its own while the command stops. The calling thread's own Ctrl-C waits until the block ends."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class _State:
    said = False   # "opgen: interrupted" was printed once already


def _leave_at_once(signum, frame) -> None:
    """A Ctrl-C while the command is already stopping (or the interpreter is closing down): end now, with no
    traceback. What a resumable command finished is on disk already (a build's every marker follows its data); an
    output it was still writing is left as `kill -9` would leave it."""
    with contextlib.suppress(Exception):
        if not _State.said:
            sys.stderr.write("opgen: interrupted\n")
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(INTERRUPTED)


def _stop_command(signum, frame) -> None:
    signal.signal(signal.SIGINT, _leave_at_once)   # the command's clean-up is not interrupted in turn
    raise KeyboardInterrupt


def said_interrupted() -> None:
    """Record that the one-line message was printed, so that a later Ctrl-C prints nothing more."""
    _State.said = True


def _quiet_on_the_way_out() -> None:
    with contextlib.suppress(ValueError):
        signal.signal(signal.SIGINT, _leave_at_once)


@contextlib.contextmanager
def first_interrupt_stops() -> Iterator[None]:
    """Inside: a first Ctrl-C raises KeyboardInterrupt in the main thread, any later one leaves at once (and so does
    one after the first, once outside). Else after: the handler as it was, and once the process closes down (its exit handlers stop pool workers, which takes a moment) a
    Ctrl-C leaves at once too. Only where Ctrl-C raises KeyboardInterrupt now (not where it is ignored)."""
    active = threading.current_thread() is threading.main_thread() \
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if not active:
        yield
        return
    _State.said = False
    signal.signal(signal.SIGINT, _stop_command)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGINT) is _stop_command:   # not interrupted: as it was
            signal.signal(signal.SIGINT, signal.default_int_handler)
        atexit.unregister(_quiet_on_the_way_out)
        atexit.register(_quiet_on_the_way_out)   # the last registered runs first, before the pools' own
