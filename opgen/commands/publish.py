"""`opgen publish`: not built yet."""

from opgen.errors import UsageError


def register(sub) -> None:
    parser = sub.add_parser("publish", help="(not built yet)")
    parser.set_defaults(func=run)


def run(args) -> int:
    raise UsageError("'publish' is not built yet")
