"""Each sandbox worker's peak memory in the samples scripts/gpu/memory_sampler.py took beside a build, and the
workers whose resident memory passed a line: what they held on the host (anonymous, file) and on the GPU then.

    python scripts/analysis/memory_peaks.py memory.jsonl.gz [more.jsonl.gz ...] [--above-mb 8000] [--json]
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path


def read_samples(paths: list[Path]) -> list[dict]:
    samples = []
    for path in paths:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as lines:
            samples += [json.loads(line) for line in lines if line.strip()]
    return samples


def peaks(samples: list[dict], above_mb: float) -> dict:
    """Every worker's sample at its highest resident memory; those above `above_mb`, highest first."""
    highest: dict[int, dict] = {}
    for sample in samples:
        for worker in sample["workers"]:
            if worker.get("rss_mb", 0.0) > highest.get(worker["pid"], {}).get("rss_mb", -1.0):
                highest[worker["pid"]] = worker
    over = sorted((w for w in highest.values() if w["rss_mb"] > above_mb), key=lambda w: -w["rss_mb"])
    return {"samples": len(samples), "workers": len(highest), "above_mb": above_mb, "above": len(over),
            "max_rss_mb": max((w["rss_mb"] for w in highest.values()), default=None),
            "peaks_above": [{key: w.get(key) for key in ("pid", "rss_mb", "anon_mb", "file_mb", "gpu_mb")}
                            for w in over]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--above-mb", type=float, default=8000.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = peaks(read_samples(args.files), args.above_mb)
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{report['samples']} samples, {report['workers']} workers, {report['above']} peaked above "
          f"{args.above_mb:.0f} MB resident (highest {report['max_rss_mb']} MB)")
    for worker in report["peaks_above"]:
        print(f"  pid {worker['pid']}: {worker['rss_mb']} MB resident, {worker['anon_mb']} anonymous, "
              f"{worker['file_mb']} file, {worker['gpu_mb']} MB on the GPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
