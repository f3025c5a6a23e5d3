"""Subcommands of `opgen`; each module has `register(subparsers)` that sets `func`."""

from opgen.commands import (
    audit,
    build,
    check,
    dedup,
    prior,
    profile,
    publish,
    retime,
    sample,
    time,
    validate,
    vocab,
)

COMMANDS = (vocab, sample, validate, dedup, time, build, publish, retime, check, audit, profile, prior)
