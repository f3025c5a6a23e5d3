"""Loading the KernelBench reference: from the Hugging Face Hub, a KernelBench checkout, or a JSONL/parquet file."""

from __future__ import annotations

import os
import re
from pathlib import Path

from opgen.errors import UsageError
from opgen.jsonl import iter_jsonl

HUB_ID = "ScalingIntelligence/KernelBench"
HUB_SPLITS = ("level_1", "level_2", "level_3", "level_4")
ENV_VARIABLE = "OPGEN_KERNELBENCH"   # lets a machine name its KernelBench once instead of passing --reference everywhere
BESIDE = Path("shared") / "kernelbench" / "problems.jsonl"   # the local copy, looked for in a folder's parent
COLUMNS = ("code", "level", "name", "problem_id")


def local_copies() -> list[Path]:
    """Where a local copy (`../shared/kernelbench/problems.jsonl`) is looked for, in order: beside the clone opgen
    runs from (when its code is a source checkout, as in an editable install), then beside the current folder (a
    clone that a regular pip install is run from)."""
    places = []
    source = Path(__file__).resolve().parents[1]
    if (source / "pyproject.toml").is_file():
        places.append(source.parent / BESIDE)
    places.append(Path.cwd().resolve().parent / BESIDE)
    return list(dict.fromkeys(places))


def resolve_reference(source: str | None = None) -> str:
    """The KernelBench every command reads, by one rule: `source` when given (--reference), else $OPGEN_KERNELBENCH,
    else the first local copy of `local_copies()` that exists, else the Hugging Face Hub (HUB_ID)."""
    if source:
        return source
    if os.environ.get(ENV_VARIABLE):
        return os.environ[ENV_VARIABLE]
    return next((str(path) for path in local_copies() if path.is_file()), HUB_ID)


def load_reference(source: str | None = None) -> list[dict]:
    """KernelBench problems as rows with code, level, name, problem_id, sorted by (level, problem_id, name).

    `source`: a JSONL or parquet file, a folder holding `level*/*.py` (a checkout or its `KernelBench/`
    folder), or a Hugging Face dataset id; None: the one rule of `resolve_reference`. Raises UsageError when it
    cannot load.
    """
    source = resolve_reference(source)
    path = Path(source).expanduser()
    if path.is_dir():
        rows = _from_folder(path)
    elif path.is_file():
        rows = _from_file(path)
    elif looks_like_path(source):
        raise UsageError(f"KernelBench reference not found: {source}")
    else:
        rows = _from_hub(source)
    if not rows:
        raise UsageError(f"KernelBench reference {source} holds no problems")
    return sorted(rows, key=lambda row: (row["level"], row["problem_id"], row["name"]))


def looks_like_path(source: str) -> bool:
    """A hub id is `org/name`; anything else that does not exist on disk was meant as a path."""
    return source.startswith(("/", ".", "~")) or source.count("/") != 1 or source.endswith((".jsonl", ".json", ".parquet"))


def _row(code: object, level: object, name: object, problem_id: object, where: str) -> dict:
    if not isinstance(code, str) or not isinstance(name, str):
        raise UsageError(f"{where}: a KernelBench row needs string 'code' and 'name'")
    try:
        return {"code": code, "level": int(level), "name": name, "problem_id": int(problem_id)}
    except (TypeError, ValueError):
        raise UsageError(f"{where}: 'level' and 'problem_id' must be integers") from None


def _from_file(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as error:  # pyarrow raises several types for a bad file
            raise UsageError(f"{path}: not a readable parquet file ({error})") from None
        missing = [column for column in COLUMNS if column not in table.column_names]
        if missing:
            raise UsageError(f"{path}: missing column(s) {', '.join(missing)}")
        return [_row(*(record[c] for c in COLUMNS), f"{path}") for record in table.select(list(COLUMNS)).to_pylist()]
    rows = []
    for number, record in iter_jsonl(path):
        if not isinstance(record, dict) or any(column not in record for column in COLUMNS):
            raise UsageError(f"{path}:{number}: a KernelBench row needs {', '.join(COLUMNS)}")
        rows.append(_row(*(record[c] for c in COLUMNS), f"{path}:{number}"))
    return rows


_LEVEL_DIR = re.compile(r"^level_?(\d+)$")
_PROBLEM_ID = re.compile(r"^(\d+)_")


def _from_folder(path: Path) -> list[dict]:
    roots = [path, path / "KernelBench"]
    rows = []
    for root in roots:
        for level_dir in sorted(p for p in root.glob("level*") if p.is_dir()):
            level = _LEVEL_DIR.match(level_dir.name)
            if not level:
                continue
            for file in sorted(level_dir.glob("*.py")):
                problem = _PROBLEM_ID.match(file.name)
                code = file.read_text(encoding="utf-8", errors="replace")
                rows.append(_row(code, level.group(1), file.name, problem.group(1) if problem else 0, str(file)))
        if rows:
            return rows
    raise UsageError(f"{path}: no KernelBench problems (expected level*/N_Name.py or KernelBench/level*/...)")


LOCAL_COPY = ("offline, pass --reference with a local copy (a problems.jsonl/parquet file or a KernelBench checkout), "
              f"set {ENV_VARIABLE}, or put the copy at ../{BESIDE.as_posix()} beside the clone")


def _from_hub(hub_id: str) -> list[dict]:
    from opgen.hub import hub_unreachable, offline_mode

    # offline mode reads the Hub cache, which needs no probe; otherwise fail in seconds rather than after retries
    unreachable = None if offline_mode() else hub_unreachable()
    if unreachable:
        raise UsageError(f"cannot load KernelBench from the Hugging Face Hub ({hub_id}): {unreachable}; {LOCAL_COPY}")
    try:
        import datasets

        rows = []
        for split in HUB_SPLITS:
            for record in datasets.load_dataset(hub_id, split=split):
                rows.append(_row(*(record[c] for c in COLUMNS), f"{hub_id}[{split}]"))
        return rows
    except UsageError:
        raise
    except Exception as error:  # offline, unknown id, missing split: datasets raises many types
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        raise UsageError(f"cannot load KernelBench from the Hugging Face Hub ({hub_id}): {first_line}; {LOCAL_COPY}") \
            from None
