"""Reading task inputs (JSONL of records or a folder of .py files) and writing JSONL outputs."""

from __future__ import annotations

import json
import os
import tokenize
from collections.abc import Iterable, Iterator
from pathlib import Path

from opgen.errors import UsageError
from opgen.records import task_id


def source_text(path: str | os.PathLike) -> str:
    """A Python file's text as Python reads it: a byte-order mark or a coding line honoured (PEP 263), else UTF-8.
    Raises OSError, UnicodeDecodeError or SyntaxError (a coding line naming no codec)."""
    with tokenize.open(path) as handle:
        return handle.read()


def read_inputs(path: str | os.PathLike) -> list[dict]:
    """Records from a JSONL file (each with `code`), a folder of `.py` task files, or one `.py` task file.

    Every record gets `source` (the input record's `id`, else its line, or the file name) and `id` (a string: a
    record's own when it is one, else the code's digest).
    """
    path = Path(path)
    if not path.exists():
        raise UsageError(f"input not found: {path}")
    if path.is_dir() or path.suffix == ".py":
        files = sorted(p for p in path.iterdir() if p.suffix == ".py" and p.is_file()) if path.is_dir() else [path]
        if not files:
            raise UsageError(f"no .py task files in folder: {path}")
        records = []
        for file in files:
            try:
                code = source_text(file)
            except (UnicodeDecodeError, SyntaxError):   # its bytes replaced: the parse step then says what is wrong
                code = file.read_text(encoding="utf-8", errors="replace")
            records.append({"source": file.name, "id": task_id(code), "code": code})
        return records
    return list(_read_jsonl_records(path))


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, object]]:
    """(line number, parsed value) for every non-blank line; a malformed line is a UsageError naming it."""
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as error:
                raise UsageError(f"{path}:{number}: malformed JSON line ({error.msg})") from None


def _read_jsonl_records(path: Path) -> Iterator[dict]:
    for number, record in iter_jsonl(path):
        if not isinstance(record, dict) or not isinstance(record.get("code"), str):
            raise UsageError(f"{path}:{number}: record has no string field 'code'")
        if not isinstance(record.get("id"), str) or not record["id"]:   # verdict lines carry string ids
            record["id"] = str(record["id"]) if type(record.get("id")) is int else task_id(record["code"])
        if not isinstance(record.get("source"), str):
            record["source"] = record["id"]
        yield record


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """All JSON objects of a JSONL file; a truncated last line (killed writer) is ignored."""
    rows = []
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):
                break
            raise UsageError(f"{path}:{number}: malformed JSON line") from None
    return rows


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> int:
    """Write rows atomically (temp file + rename); returns the number written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    count = 0
    with open(tmp, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, sort_keys=False) + "\n")
            count += 1
    os.replace(tmp, path)
    return count


def file_in_the_way(path: str | os.PathLike) -> Path | None:
    """The nearest of `path`'s parent folders that exists as something other than a folder (a file where a folder
    should be, so that nothing can be made under it), or None."""
    for parent in Path(path).expanduser().absolute().parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def require_writable(path: str | os.PathLike, option: str = "--out", inputs: str | os.PathLike | None = None) -> None:
    """Make sure `path` can be written (its folder created, a file made beside it) before any work, and is not the
    `inputs` it would overwrite: UsageError (one line, exit 2) when it cannot, rather than a traceback once the work
    is done or the input lost."""
    path = Path(path)
    if inputs is not None and path.resolve() == Path(inputs).resolve():
        raise UsageError(f"{option} {path} is the input: its tasks would be overwritten by the verdicts")
    blocker = file_in_the_way(path)
    if blocker is not None:
        raise UsageError(f"cannot write {option} {path}: {blocker} is not a folder")
    probe = path.with_name(f".{path.name}.probe")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        probe.touch()
        probe.unlink()
    except OSError as error:
        raise UsageError(f"cannot write {option} {path}: {error.strerror or error}") from None
