"""Filter `parse_error`: the task source must parse as Python."""

from __future__ import annotations

from filters.base import Filter, Verdict
from opgen.taskcode.syntax import parse


class ParseFilter(Filter):
    """Rejects source that does not parse."""

    name = "parse"

    def filter(self, record: dict) -> Verdict:
        try:
            parse(record["code"])
        except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
            return Verdict.reject("parse_error", f"{type(error).__name__}: {error}")
        return Verdict.ok()
