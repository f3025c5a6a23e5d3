"""Task rows from whatever a build or a publish leaves: a run folder (its tasks.parquet), a published dataset folder
(one config, read with `datasets` as a consumer reads it), a parquet file, or a JSONL of records."""

from __future__ import annotations

from pathlib import Path

from opgen.errors import UsageError
from opgen.jsonl import iter_jsonl


def read_task_rows(path: Path, config: str = "default") -> list[dict]:
    """Every row of `path` as a dict; `config` names the published folder's config (a precision such as bf16). A
    malformed JSONL line is a UsageError naming its line."""
    if path.is_dir() and (path / "tasks.parquet").is_file():
        path = path / "tasks.parquet"
    if path.is_dir():
        from opgen.publish.reading import load_rows

        return load_rows(path, config, fresh=True)   # not datasets' cache, which a rebuilt folder would hit
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    rows = []
    for number, row in iter_jsonl(path):
        if not isinstance(row, dict):
            raise UsageError(f"{path}:{number}: not a JSON object")
        rows.append(row)
    return rows
