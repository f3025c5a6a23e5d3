"""Task rows from whatever a build or a publish leaves: a run folder (its tasks.parquet), a published dataset folder
(one config, read with `datasets` as a consumer reads it), a parquet file, or a JSONL of records."""

from __future__ import annotations

import json
from pathlib import Path


def read_task_rows(path: Path, config: str = "default") -> list[dict]:
    """Every row of `path` as a dict; `config` names the published folder's config (a precision such as bf16)."""
    if path.is_dir() and (path / "tasks.parquet").is_file():
        path = path / "tasks.parquet"
    if path.is_dir():
        import datasets

        shown = datasets.is_progress_bar_enabled()
        datasets.disable_progress_bars()   # a check's output is its table, not the loader's progress
        try:
            # read again, not from datasets' cache, which a rebuilt folder of the same name and sizes would hit
            return datasets.load_dataset(str(path), config, split="train", download_mode="force_redownload").to_list()
        finally:
            if shown:
                datasets.enable_progress_bars()
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
