"""Subcommands of `opgen`; each module has `register(subparsers)` that sets `func`."""

from opgen.commands import (
    build,
    check,
    dedup,
    grade,
    heldout,
    prior,
    publish,
    retime,
    sample,
    time,
    validate,
    vocab,
)

COMMANDS = (vocab, sample, validate, dedup, time, build, publish, retime, heldout, check, grade, prior)
