"""Publishing a build: the dataset folder laid out as `push_to_hub` does, then a Hub upload or a local copy."""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from opgen.errors import UsageError
from opgen.publish.baselines import (
    BASELINES_DIR,
    baseline_configs,
    baselines_section,
    write_kernelbench_files,
)
from opgen.publish.card import dataset_info_yaml, render_card
from opgen.publish.plots import write_plots
from opgen.publish.upload import REPO_ID, copy_to_folder, is_local_target, upload_folder
from opgen.records import DATASET_SCHEMA
from opgen.taskcode.dtypes import DEFAULT_DTYPE

ROWS_PER_SHARD = 50_000


@dataclass
class PrecisionPart:
    """The rows of one more precision, published beside the default config's as config `<dtype>`."""

    dtype: str
    table: pa.Table
    stats: dict
    config: dict


@dataclass
class PublishResult:
    """Where the dataset folder is and where it went (a Hub URL, a local folder, or nowhere on a dry run)."""

    folder: Path
    rows: int
    target: str | None


def load_run(run_dir: Path) -> tuple[list[dict], dict, dict]:
    """A finished build's dataset rows, stats.json and config.json (a UsageError when it holds none)."""
    return _load_run(Path(run_dir))


def _load_run(run_dir: Path) -> tuple[list[dict], dict, dict]:
    tasks = run_dir / "tasks.parquet"
    if not tasks.is_file():
        raise UsageError(f"{run_dir} holds no finished build (no tasks.parquet); run `opgen build` first")
    try:
        table = pq.read_table(tasks, schema=DATASET_SCHEMA)
        stats = json.loads((run_dir / "stats.json").read_text(encoding="utf-8"))
        config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise UsageError(f"{run_dir}: unreadable build output ({error})") from None
    return table.to_pylist(), stats, config


def write_dataset_folder(run_dir: str | os.PathLike, repo_id: str, out: str | os.PathLike | None = None,
                         rows_per_shard: int = ROWS_PER_SHARD) -> tuple[Path, int]:
    """Write data/train-XXXXX-of-YYYYY.parquet shards, README.md and plots/ for the build in `run_dir`.

    The folder (default RUN_DIR/dataset) is built beside its final place and swapped in whole.
    """
    run_dir = Path(run_dir)
    _, stats, config = _load_run(run_dir)
    table = pq.read_table(run_dir / "tasks.parquet", schema=DATASET_SCHEMA)
    return write_table_folder(table, stats, config, repo_id, Path(out) if out else run_dir / "dataset", rows_per_shard)


def _write_shards(table: pa.Table, folder: Path, rows_per_shard: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    shards = max(1, math.ceil(table.num_rows / rows_per_shard))
    for k in range(shards):
        part = table.slice(k * rows_per_shard, rows_per_shard)
        pq.write_table(part, folder / f"train-{k:05d}-of-{shards:05d}.parquet")


def dataset_infos(table: pa.Table, data: Path, config: dict, parts: list[PrecisionPart]) -> dict | list[dict]:
    """The card's `dataset_info`: one entry, or with other precisions one per config (default, its dtype, each
    part's), each with its own sizes, so `datasets` keys its cache of every config on that config's files."""
    def parquet_bytes(folder: Path) -> int:
        return sum(f.stat().st_size for f in folder.glob("*.parquet"))

    info = dataset_info_yaml(table, parquet_bytes(data))
    if not parts:
        return info
    return [{"config_name": name, **info} for name in ("default", config.get("dtype", DEFAULT_DTYPE))] + [
        {"config_name": part.dtype, **dataset_info_yaml(part.table, parquet_bytes(data / part.dtype))}
        for part in parts]


def precision_configs(config: dict, parts: list[PrecisionPart]) -> list[dict]:
    """The card's configs of the precisions: each part's `data/<dtype>/`, and the default's under its own dtype."""
    default_dtype = config.get("dtype", DEFAULT_DTYPE)
    return [{"config_name": default_dtype, "data_files": [{"split": "train", "path": "data/train-*"}]},
            *({"config_name": part.dtype, "data_files": [{"split": "train", "path": f"data/{part.dtype}/train-*"}]}
              for part in parts)]


def write_table_folder(table: pa.Table, stats: dict, config: dict, repo_id: str, folder: Path,
                       rows_per_shard: int = ROWS_PER_SHARD, sources: list[dict] | None = None,
                       precisions: list[PrecisionPart] | None = None) -> tuple[Path, int]:
    """The dataset folder of `table` (DATASET_SCHEMA) with the card of `stats` and `config`; `sources`, for rows
    merged from several builds, lists them (see opgen/pipeline/merge.py); `precisions`, the rows of other
    precisions, each a config named by its dtype (data/<dtype>/)."""
    rows = table.to_pylist()
    precisions = precisions or []
    staging = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    _write_shards(table, staging / "data", rows_per_shard)
    for part in precisions:
        _write_shards(part.table, staging / "data" / part.dtype, rows_per_shard)
        write_kernelbench_files(part.table.to_pylist(), staging / BASELINES_DIR, precision=part.dtype)
    keep_retimed_baselines(folder, staging)
    write_kernelbench_files(rows, staging / BASELINES_DIR)
    plots, note = write_plots(rows, config.get("mix") or {}, staging)
    info = dataset_infos(table, staging / "data", config, precisions)
    section = baselines_section(staging, sorted({r["hardware"] for r in rows if r.get("eager_ms") is not None}))
    extra = (precision_configs(config, precisions) if precisions else []) + baseline_configs(staging)
    render_card(rows, stats, config, repo_id, plots, note, info, extra, section, sources,
                [(part.dtype, part.table.to_pylist(), part.stats) for part in precisions]).save(staging / "README.md")
    if folder.exists():
        shutil.rmtree(folder)
    staging.rename(folder)
    return folder, len(rows)


def keep_retimed_baselines(old: Path, staging: Path) -> None:
    """A rebuilt folder keeps the `baseline-<gpu>` configs that `opgen retime` added to the old one."""
    for folder in sorted((old / BASELINES_DIR).glob("*")):
        if folder.is_dir():
            shutil.copytree(folder, staging / BASELINES_DIR / folder.name)


def publish(run_dir: str | os.PathLike, repo_id: str, *, private: bool = False, dry_run: bool = False,
            out: str | os.PathLike | None = None, token: str | None = None) -> PublishResult:
    """Write the dataset folder, then (unless dry_run) copy it to a local `repo_id` or upload it to the Hub.

    The token comes from `token` or HF_TOKEN; it is never printed or written.
    """
    folder, rows = write_dataset_folder(run_dir, _card_id(repo_id), out)
    return deliver(folder, rows, repo_id, private=private, dry_run=dry_run, token=token)


def _card_id(repo_id: str) -> str:
    """The name the card gives the dataset; a `--repo-id` that is neither ORG/NAME nor a local folder is refused."""
    local = is_local_target(repo_id)
    if not local and not REPO_ID.match(repo_id):
        raise UsageError(f"--repo-id must look like ORG/NAME or be a local folder path, got {repo_id!r}")
    return Path(repo_id).name if local else repo_id


def publish_table(table: pa.Table, stats: dict, config: dict, folder: Path, repo_id: str, *,
                  sources: list[dict] | None = None, private: bool = False, dry_run: bool = False,
                  token: str | None = None, precisions: list[PrecisionPart] | None = None) -> PublishResult:
    """`publish` for rows that are not one build's `tasks.parquet` (rows merged from several builds, several
    precisions)."""
    folder, rows = write_table_folder(table, stats, config, _card_id(repo_id), folder, sources=sources,
                                      precisions=precisions)
    return deliver(folder, rows, repo_id, private=private, dry_run=dry_run, token=token)


def deliver(folder: Path, rows: int, repo_id: str, *, private: bool = False, dry_run: bool = False,
            token: str | None = None) -> PublishResult:
    """Copy a written dataset folder to a local `repo_id` or upload it to the Hub (nothing on a dry run)."""
    local = is_local_target(repo_id)
    if dry_run:
        return PublishResult(folder, rows, None)
    if local:
        return PublishResult(folder, rows, str(copy_to_folder(folder, repo_id)))
    token = token or os.environ.get("HF_TOKEN")
    if not token:
        raise UsageError(f"no Hugging Face token: set HF_TOKEN or pass --token (the dataset folder is ready at {folder})")
    return PublishResult(folder, rows, upload_folder(folder, repo_id, token, private))
