"""The fixed arrow schema of a dataset row (SPEC.md §2), so all-null timing columns still have types."""

from __future__ import annotations

import json

import pyarrow as pa

DATASET_SCHEMA = pa.schema([
    ("code", pa.string()),
    ("ops", pa.list_(pa.string())),
    ("data_source", pa.string()),
    ("id", pa.string()),
    ("num_ops", pa.int64()),
    ("seed", pa.int64()),
    ("graph", pa.string()),
    ("input_shapes", pa.list_(pa.list_(pa.int64()))),
    ("output_shape", pa.list_(pa.int64())),
    ("flops", pa.int64()),
    ("bytes_moved", pa.int64()),
    ("kb_nearest", pa.string()),
    ("kb_similarity", pa.float64()),
    ("eager_ms", pa.float64()),
    ("compile_ms", pa.float64()),
    ("eager_ms_iqr", pa.float64()),
    ("compile_ms_iqr", pa.float64()),
    ("eager_device_us", pa.float64()),
    ("compile_device_us", pa.float64()),
    ("compile_speedup", pa.float64()),
    ("hardware", pa.string()),
    ("torch_version", pa.string()),
    ("cuda_version", pa.string()),
])
COLUMNS = tuple(DATASET_SCHEMA.names)
TIMING_COLUMNS = COLUMNS[COLUMNS.index("eager_ms"):]


def dataset_row(record: dict) -> dict:
    """The SPEC.md columns of a record (missing ones null; `graph` as a JSON string; ints as ints)."""
    row = {name: record.get(name) for name in COLUMNS}
    if row["graph"] is not None and not isinstance(row["graph"], str):
        row["graph"] = json.dumps(row["graph"], sort_keys=True)
    for name in ("num_ops", "seed", "flops", "bytes_moved"):
        if row[name] is not None:
            row[name] = int(row[name])
    if row["output_shape"] is not None and not isinstance(row["output_shape"], list):
        row["output_shape"] = None
    return row


def dataset_table(records: list[dict]) -> pa.Table:
    """An arrow table of the dataset rows with DATASET_SCHEMA."""
    return pa.Table.from_pylist([dataset_row(r) for r in records], schema=DATASET_SCHEMA)
