"""The exceptions that carry a verdict or an exit status: bad usage (exit 2), a task that broke a rule, and a
machine that cannot run the work (exit 2, never a verdict)."""


class UsageError(Exception):
    """Raised for bad command-line usage or unreadable input; the CLI prints it as one line and exits 2."""


class TaskProblem(Exception):
    """A task broke a rule at run time (no Model, wrong types, ...); carries the reason code."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason


class MachineFault(Exception):
    """The machine cannot do the work (no CUDA device, a lost device, a worker that cannot start): never a task's
    verdict. The command stops, the CLI prints it as one line and exits 2, and the candidates in flight are judged
    when the command runs again (see opgen/sandbox/faults.py)."""
