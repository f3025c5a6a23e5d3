"""Subcommands of `opgen`; each module has `register(subparsers)` that sets `func`."""

from opgen.commands import (
    audit,
    build,
    check,
    dedup,
    grade,
    heldout,
    prior,
    profile,
    publish,
    retime,
    sample,
    time,
    validate,
    vocab,
    workdir,
)

COMMANDS = (vocab, sample, validate, dedup, time, build, publish, retime, heldout, check, audit, profile, grade, workdir, prior)
