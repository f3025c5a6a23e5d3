"""The held-out stage on a finished build (its tasks.parquet) or a published dataset folder (its parquet shards
and card), in place: the rows gain the three held-out columns; a rerun resumes, and a finished one is redone
only with `again`. A run folder keeps the stage's log (`.held-out.jsonl.partial`), so that its tasks written out
again by a resumed build get the same columns back without running anything."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from opgen.errors import UsageError
from opgen.heldout.stage import DEFAULT_CONFIGS, HELD_OUT_COLUMNS, held_out_columns, stage_log
from opgen.publish.heldout_section import SECTION_END, SECTION_START, held_out_counts, held_out_section
from opgen.records import DATASET_SCHEMA

LOG_NAME = ".held-out.jsonl"


def target_files(path: Path) -> tuple[list[Path], Path | None]:
    """The parquet files holding the rows (a run folder's tasks.parquet, or a dataset folder's default config
    shards) and the card to update (None for a run folder)."""
    if (path / "tasks.parquet").is_file():
        return [path / "tasks.parquet"], None
    shards = sorted((path / "data").glob("train-*.parquet"))
    if shards and (path / "README.md").is_file():
        return shards, path / "README.md"
    raise UsageError(f"{path} is neither a finished build (no tasks.parquet) nor a dataset folder (no data/train-*"
                     f".parquet with a README.md card)")


def add_held_out(path: str | Path, *, device: str = "cpu", configs: int = DEFAULT_CONFIGS, workers: int = 2,
                 timeout_s: float = 600.0, memory_mb: int | None = 4096, seed: int = 0, again: bool = False,
                 progress: bool = True) -> dict:
    """Held-out sizes for every row at `path`, written into its files; returns the stage's summary (tasks by
    configurations held, rows reused from an interrupted run, whether it ran at all)."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path} does not exist")
    files, card = target_files(path)
    tables = [pq.read_table(f) for f in files]
    rows = [row for table in tables for row in table.select(["id", "code"]).to_pylist()]
    if not rows:
        raise UsageError(f"{path} holds no task")
    done = all("held_out_count" in t.column_names and t.column("held_out_count").null_count == 0 for t in tables)
    if done and not again:
        lines = [row for t in tables for row in t.select(list(HELD_OUT_COLUMNS)).to_pylist()]
        return {**_counts(lines), "reused": len(lines), "ran": False}
    log_path = path / LOG_NAME
    chunk_log = stage_log(log_path, rows, device, configs, seed)
    lines, reused = held_out_columns(rows, chunk_log=chunk_log, device=device, configs=configs, workers=workers,
                                     timeout_s=timeout_s, memory_mb=memory_mb, seed=seed, progress=progress)
    start = 0
    for file, table in zip(files, tables):
        part = lines[start:start + table.num_rows]
        start += table.num_rows
        _write_with_columns(file, table, part)
    if card is not None:   # a dataset folder keeps no log; a run folder keeps it, should its tasks be written again
        _update_card(path, card, [row for f in files for row in pq.read_table(f).to_pylist()])
        chunk_log.finish()
    return {**_counts(lines), "reused": reused, "ran": True}


def _counts(lines: list[dict]) -> dict:
    return {"tasks": len(lines), "by_count": held_out_counts(lines)}


def held_text(summary: dict) -> str:
    """`add_held_out`'s summary in words: tasks by configurations held, most first."""
    return ", ".join(f"{tasks} with {count}" for count, tasks in sorted(summary["by_count"].items(), reverse=True))


def _write_with_columns(file: Path, table: pa.Table, lines: list[dict]) -> None:
    """The file rewritten (atomically) with the held-out columns set, in the dataset schema's types and order
    where the table follows it."""
    for name in HELD_OUT_COLUMNS:
        column = pa.array([line[name] for line in lines], type=DATASET_SCHEMA.field(name).type)
        if name in table.column_names:
            table = table.set_column(table.column_names.index(name), name, column)
        else:
            table = table.append_column(DATASET_SCHEMA.field(name), column)
    if set(table.column_names) <= set(DATASET_SCHEMA.names):
        table = table.select([name for name in DATASET_SCHEMA.names if name in table.column_names])
    staging = file.with_name(file.name + ".partial")
    pq.write_table(table, staging)
    staging.replace(file)


def _update_card(folder: Path, card_path: Path, rows: list[dict]) -> None:
    """The card's held-out section replaced (or added before its Columns section), and its dataset_info's
    features and sizes computed again from the rewritten shards."""
    from huggingface_hub import DatasetCard

    from opgen.publish.card import dataset_info_yaml

    card = DatasetCard.load(card_path)
    text, section = card.text, held_out_section(rows)
    if SECTION_START in text and SECTION_END in text:
        before, rest = text.split(SECTION_START, 1)
        text = before + section + rest.split(SECTION_END, 1)[1]
    elif "\n## Columns" in text:
        before, after = text.split("\n## Columns", 1)
        text = before.rstrip("\n") + "\n\n" + section + "\n\n## Columns" + after
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    card.text = text
    shards = sorted((folder / "data").glob("train-*.parquet"))
    table = pa.concat_tables([pq.read_table(f) for f in shards])
    info = dataset_info_yaml(table, sum(f.stat().st_size for f in shards))
    existing = card.data.to_dict().get("dataset_info")
    if isinstance(existing, list):   # several configs: the default's entry (and its dtype's twin) only
        default_names = {"default", *(c.get("config_name") for c in card.data.to_dict().get("configs") or []
                                       if any(str(f.get("path", "")).startswith("data/train-")
                                              for f in c.get("data_files") or []))}
        card.data.dataset_info = [{**entry, **info} if entry.get("config_name") in default_names else entry
                                  for entry in existing]
    else:
        card.data.dataset_info = info
    card.save(card_path)
