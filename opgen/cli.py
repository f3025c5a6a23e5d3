"""The `opgen` command line: one subcommand per stage, exit 0 done, 2 bad input or a machine fault (no CUDA, a lost
GPU, a file that cannot be written), 1 internal error."""

from __future__ import annotations

import argparse
import sys

from opgen.commands import COMMANDS
from opgen.errors import MachineFault, UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, as SPEC.md §4 asks
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="opgen", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return int(args.func(args) or 0)
    except UsageError as error:
        print(f"opgen: error: {error}", file=sys.stderr)
        return 2
    except MachineFault as error:  # the machine, not the input: nothing was judged on it (README, exit status)
        print(f"opgen: error: machine fault: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # a file or folder that cannot be read or written: one line, as bad input
        where = f" {error.filename}" if error.filename else ""
        print(f"opgen: error: cannot use{where}: {error.strerror or error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("opgen: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
