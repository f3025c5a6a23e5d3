"""Subcommands of `opgen`; each module has `register(subparsers)` that sets `func`."""

from opgen.commands import build, check, dedup, grade, prior, publish, retime, sample, time, validate, vocab

COMMANDS = (vocab, sample, validate, dedup, time, build, publish, retime, check, grade, prior)
