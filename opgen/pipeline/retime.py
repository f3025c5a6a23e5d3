"""`opgen retime`: time a published dataset again on this machine's GPU and add the result as a config of it."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

from opgen.checkpoint import ChunkLog, inputs_identity, run_in_chunks
from opgen.errors import UsageError
from opgen.publish.baselines import (
    BASELINES_DIR,
    baseline_configs,
    baselines_section,
    gpu_slug,
    replace_section,
    write_baseline_config,
)
from opgen.publish.reading import load_tasks, resolve_dataset
from opgen.publish.upload import upload_folder
from opgen.timing.driver import TimingOptions, time_records


def retime(dataset: str, options: TimingOptions, *, out: str | None = None, name: str | None = None,
           limit: int | None = None, timeout_s: float = 600.0, workers_per_gpu: int | None = None,
           push: bool = False, token: str | None = None, progress: bool = True,
           config: str = "default") -> tuple[Path, str, int]:
    """Time every task of `dataset`'s `config` and write config `baseline-<gpu>` (`baseline-<gpu>-<config>` for a
    precision config such as bf16); returns (folder, config name, rows)."""
    folder, hub_id = resolve_dataset(dataset, out)
    tasks = load_tasks(folder, fresh=True, config=config)[:limit]   # the files as they are now, not a cache
    if not tasks:
        raise UsageError(f"{folder} holds no task")
    log_path = folder / BASELINES_DIR / (".retime.jsonl" if config == "default" else f".retime-{config}.jsonl")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    identity = inputs_identity(tasks, command="retime", timeout=timeout_s, config=config,
                               **dataclasses.asdict(options))
    chunk_log = ChunkLog(log_path, identity)

    def time_chunk(chunk: list[dict]) -> tuple[list[dict], None]:
        return time_records(chunk, options, timeout_s=timeout_s, progress=False, workers_per_gpu=workers_per_gpu,
                            reuse_pools=True), None

    timed, _, reused = run_in_chunks(tasks, 16, time_chunk, chunk_log, "retime", progress=progress)
    if reused:
        print(f"retime: resumed {reused} of {len(tasks)} timings", file=sys.stderr)
    hardware = next((r["hardware"] for r in timed if r.get("hardware")), None) or options.device
    slug = (name or gpu_slug(hardware)) + ("" if config == "default" else f"-{config}")
    write_baseline_config(timed, folder, slug)
    chunk_log.finish()
    add_config_to_card(folder)
    if push:
        if hub_id is None:
            raise UsageError("--push needs a Hub dataset id as DATASET")
        token = token or os.environ.get("HF_TOKEN")
        if not token:
            raise UsageError(f"no Hugging Face token: set HF_TOKEN or pass --token (the baseline is ready in {folder})")
        upload_folder(folder, hub_id, token, private=False)
    return folder, f"baseline-{slug}", len(timed)


def add_config_to_card(folder: Path) -> None:
    """The card lists every baseline config in its YAML header and its Baselines section."""
    from huggingface_hub import DatasetCard

    card = DatasetCard.load(folder / "README.md")
    configs = [c for c in (card.data.configs or []) if not str(c.get("config_name", "")).startswith("baseline-")]
    card.data.configs = configs + baseline_configs(folder)
    default_hardware = _default_hardware(folder)
    card.text = replace_section(card.text, baselines_section(folder, default_hardware))
    card.save(folder / "README.md")


def _default_hardware(folder: Path) -> list[str]:
    import pyarrow.parquet as pq

    found: set[str] = set()
    for shard in sorted((folder / "data").glob("train-*.parquet")):
        table = pq.read_table(shard, columns=["hardware", "eager_ms"])
        found.update(h for h, ms in zip(table.column("hardware").to_pylist(), table.column("eager_ms").to_pylist())
                     if h and ms is not None)
    return sorted(found)
