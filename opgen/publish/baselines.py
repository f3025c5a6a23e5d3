"""Baseline timings a consumer can use as they are: KernelBench `results/timing` JSON files, and extra dataset
configs (`baseline-<gpu>`) with the timings taken again on another GPU by `opgen retime`."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from opgen.records import DATASET_SCHEMA, PUBLISHED_TIMING_COLUMNS

BASELINES_DIR = "baselines"
KB_LEVEL_KEY = "train"          # KernelBench files group problems by level; ours by split
KB_FILES = {"eager": "baseline_time_torch.json", "compile": "baseline_time_torch_compile_inductor_default.json"}
SECTION_START, SECTION_END = "<!-- opgen:baselines -->", "<!-- /opgen:baselines -->"
BASELINE_SCHEMA = pa.schema([DATASET_SCHEMA.field("id"),
                             *(DATASET_SCHEMA.field(name) for name in PUBLISHED_TIMING_COLUMNS)])


def gpu_slug(hardware: str) -> str:
    """`NVIDIA H200` -> `nvidia-h200`: the name of a GPU's baseline config and folder."""
    return re.sub(r"[^a-z0-9]+", "-", hardware.lower()).strip("-") or "unknown"


def kernelbench_timings(rows: list[dict], kind: str) -> dict:
    """One KernelBench-format timing document for `kind` (eager or compile): per task file name `<id>.py`,
    mean, std, min, max (ms), num_trials, hardware and device. Untimed tasks are left out."""
    entries = {}
    for row in rows:
        if row.get(f"{kind}_ms_mean") is None:
            continue
        entries[f"{row['id']}.py"] = {
            "mean": row[f"{kind}_ms_mean"], "std": row[f"{kind}_ms_std"], "min": row[f"{kind}_ms_min"],
            "max": row[f"{kind}_ms_max"], "num_trials": row[f"{kind}_ms_count"], "hardware": row["hardware"],
            "device": "cuda:0" if row.get("cuda_version") else "cpu"}
    return {KB_LEVEL_KEY: entries}


def write_kernelbench_files(rows: list[dict], folder: Path, precision: str | None = None) -> list[Path]:
    """`<folder>/<GPU>_baseline_time_torch.json` and `..._torch_compile_inductor_default.json`, per GPU the rows
    were timed on (`<GPU>_<precision>_...` for a precision config's rows); none when nothing was timed."""
    written = []
    for hardware in sorted({r["hardware"] for r in rows if r.get("hardware") and r.get("eager_ms_mean") is not None}):
        mine = [r for r in rows if r.get("hardware") == hardware]
        prefix = re.sub(r"[^A-Za-z0-9]+", "_", hardware).strip("_") + (f"_{precision}" if precision else "")
        for kind, name in KB_FILES.items():
            path = folder / f"{prefix}_{name}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(kernelbench_timings(mine, kind), indent=4) + "\n", encoding="utf-8")
            written.append(path)
    return written


def write_baseline_config(rows: list[dict], dataset: Path, slug: str) -> Path:
    """The timings of a re-timing run as config `baseline-<slug>`: `baselines/<slug>/train-<content hash>.parquet`
    (id and the published timing columns) beside its KernelBench-format files.

    The file is named by its content because `datasets` keys its cache of a local folder on the card's config
    entries, not on the files: a config re-timed under the same name would otherwise load the old rows."""
    folder = dataset / BASELINES_DIR / slug
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*"):
        stale.unlink()
    table = pa.Table.from_pylist([{name: row.get(name) for name in BASELINE_SCHEMA.names} for row in rows],
                                 schema=BASELINE_SCHEMA)
    written = folder / "train.parquet.tmp"
    pq.write_table(table, written)
    written.rename(folder / f"train-{hashlib.sha256(written.read_bytes()).hexdigest()[:16]}.parquet")
    write_kernelbench_files(rows, folder)
    return folder


def baseline_configs(dataset: Path) -> list[dict]:
    """The card's `configs` entries of every baseline folder in the dataset (its file by name, see above)."""
    configs = []
    for folder in sorted((dataset / BASELINES_DIR).glob("*")):
        files = sorted(folder.glob("train-*.parquet"))
        if files:
            configs.append({"config_name": f"baseline-{folder.name}", "data_files": [
                {"split": "train", "path": f"{BASELINES_DIR}/{folder.name}/{files[-1].name}"}]})
    return configs


def baselines_section(dataset: Path, default_hardware: list[str]) -> str:
    """The card's Baselines section: which GPUs have timings, where, and how to load each."""
    lines = [SECTION_START, "## Baselines", "",
             "Timings per GPU. The default config's timing columns were taken during the build; each "
             "`baseline-<gpu>` config holds the same tasks timed again with `opgen retime` (join on `id`). "
             "KernelBench-format files (`results/timing` shape: per task mean, std, min, max, num_trials, "
             f"hardware, device; tasks keyed `<id>.py` under `{KB_LEVEL_KEY}`) lie beside each.", "",
             "| GPU | config | KernelBench-format files |", "|---|---|---|"]
    for hardware in default_hardware:
        lines.append(f"| {hardware} | `default` | `{BASELINES_DIR}/` |")
    for config in baseline_configs(dataset):
        folder = dataset / BASELINES_DIR / config["config_name"].removeprefix("baseline-")
        table = pq.read_table(next(folder.glob("train-*.parquet")), columns=["hardware"])
        gpus = sorted({h for h in table.column("hardware").to_pylist() if h}) or ["(untimed)"]
        lines.append(f"| {', '.join(gpus)} | `{config['config_name']}` | `{folder.relative_to(dataset)}/` |")
    if len(lines) == 7:
        lines.append("| (none: this build was not timed on a GPU) | | |")
    return "\n".join([*lines, SECTION_END])


def replace_section(text: str, section: str) -> str:
    """The card text with its Baselines section replaced (or appended)."""
    if SECTION_START in text and SECTION_END in text:
        before, rest = text.split(SECTION_START, 1)
        return before + section + rest.split(SECTION_END, 1)[1]
    return text.rstrip("\n") + "\n\n" + section + "\n"
