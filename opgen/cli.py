"""The `opgen` command line: one subcommand per stage of building, publishing, checking and grading GPU-kernel
training tasks. `opgen COMMAND --help` lists a command's options."""

from __future__ import annotations

import argparse
import sys
import textwrap

from opgen.errors import MachineFault, UsageError
from opgen.interrupts import INTERRUPTED, first_interrupt_stops, said_interrupted

# The exit statuses, the same for every command: `opgen --help` prints them, and the README and docs/spec.md hold the
# same table (tests/test_spec.py holds the three together).
EXIT_STATUSES = (
    (0, "done; for `opgen audit` every claim holds, for `opgen check` every row drawn passes, for `opgen grade` of "
        "one solution it is correct"),
    (1, "the command ran and its answer is no: `opgen audit` found a failing claim, `opgen check` a failing row or "
        "an eager time that disagrees, `opgen grade` of one solution an incorrect one; also any internal error (a "
        "bug, printed with its traceback)"),
    (2, "the command cannot do what it was asked, said in one line on stderr: bad usage or input, a missing path, an "
        "output it cannot write, KernelBench out of reach, or a machine fault (`opgen: error: machine fault: ...`: "
        "no CUDA, a lost GPU, a worker that cannot start; nothing was judged on it, so run the same command again "
        "on a sound machine)"),
    (INTERRUPTED, "interrupted (Ctrl-C), said in one line; what the command finished is kept, and the resumable "
                  "ones (build, validate, time, retime, heldout, grade --solutions) go on from it when run again"),
    (143, "`opgen build` stopped by SIGTERM (a time limit), as for Ctrl-C"),
)


def exit_status_text(width: int = 100) -> str:
    """The exit statuses as `opgen --help` prints them."""
    lines = ["exit status (every command):"]
    for status, meaning in EXIT_STATUSES:
        lines += textwrap.wrap(meaning, width, initial_indent=f"  {status:<5}", subsequent_indent=" " * 7)
    return "\n".join(lines)


def os_error_line(error: OSError) -> str:
    """What went wrong with a path, in a few words: a parent that is a file is named as not a folder (where the
    system would say "File exists" or "Not a directory")."""
    from opgen.jsonl import file_in_the_way

    blocker = file_in_the_way(error.filename) if error.filename else None
    why = f"{blocker} is not a folder" if blocker is not None else (error.strerror or str(error))
    return f"cannot use {error.filename}: {why}" if error.filename else f"cannot use a path: {why}"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, naming the subcommand it concerns (if any)
        command = self.prog.removeprefix("opgen").strip()
        raise UsageError(f"{command}: {message}" if command else message)


def build_parser() -> argparse.ArgumentParser:
    # imported here, not with this module: a Ctrl-C while they load is said in one line too
    from opgen.commands import COMMANDS

    parser = _Parser(prog="opgen", description=__doc__, epilog=exit_status_text(),
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    with first_interrupt_stops():
        try:
            args = build_parser().parse_args(argv)
            return int(args.func(args) or 0)
        except UsageError as error:
            print(f"opgen: error: {error}", file=sys.stderr)
            return 2
        except MachineFault as error:  # the machine, not the input: nothing was judged on it (see EXIT_STATUSES)
            print(f"opgen: error: machine fault: {error}", file=sys.stderr)
            return 2
        except OSError as error:  # a file or folder that cannot be read or written: one line, as bad input
            print(f"opgen: error: {os_error_line(error)}", file=sys.stderr)
            return 2
        except KeyboardInterrupt as error:   # the command kept what it finished; its note says where, if it has one
            print("opgen: interrupted" + (f": {error}" if str(error) else ""), file=sys.stderr)
            said_interrupted()
            return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
