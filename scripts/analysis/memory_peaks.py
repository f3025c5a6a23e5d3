"""Each sandbox worker's peak memory in the samples scripts/gpu/memory_sampler.py took beside a build, and the
workers whose resident memory passed a line: what they held on the host (anonymous, file) and on the GPU then; and
the device over all samples: its used memory, how often it was past a line, how busy it and the host's cores were.

    python scripts/analysis/memory_peaks.py memory.jsonl.gz [more.jsonl.gz ...] [--above-mb 8000]
        [--gpu-above-mb 70000] [--json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opgen.analysis.run_profile import spread  # noqa: E402


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


def _spread(values: list[float]) -> dict | None:
    return spread(values) or None


def device(samples: list[dict], gpu_above_mb: float) -> dict:
    """The device over the samples that read it: used memory (median, 90th percentile, largest) and the share of
    samples past `gpu_above_mb`; the GPU's kernel-busy and the host's CPU-busy percent (median, 90th percentile)."""
    used = [sample["gpu_used_mb"] for sample in samples if sample.get("gpu_used_mb")]
    return {"gpu_samples": len(used), "gpu_used_mb": _spread(used), "gpu_above_mb": gpu_above_mb,
            "gpu_above_share": round(sum(mb > gpu_above_mb for mb in used) / len(used), 3) if used else None,
            "gpu_busy_pct": _spread([s["gpu_busy_pct"] for s in samples if s.get("gpu_busy_pct") is not None]),
            "cpu_busy_pct": _spread([s["cpu_busy_pct"] for s in samples if s.get("cpu_busy_pct") is not None])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--above-mb", type=float, default=8000.0)
    parser.add_argument("--gpu-above-mb", type=float, default=70000.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    samples = read_samples(args.files)
    report = {**peaks(samples, args.above_mb), "device": device(samples, args.gpu_above_mb)}
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{report['samples']} samples, {report['workers']} workers, {report['above']} peaked above "
          f"{args.above_mb:.0f} MB resident (highest {report['max_rss_mb']} MB)")
    for worker in report["peaks_above"]:
        print(f"  pid {worker['pid']}: {worker['rss_mb']} MB resident, {worker['anon_mb']} anonymous, "
              f"{worker['file_mb']} file, {worker['gpu_mb']} MB on the GPU")
    on = report["device"]
    if on["gpu_used_mb"]:
        used = on["gpu_used_mb"]
        print(f"device: {used['median']:,} MB used (median; 90th percentile {used['p90']:,}, largest {used['max']:,}), "
              f"past {args.gpu_above_mb:,.0f} MB in {on['gpu_above_share']:.0%} of {on['gpu_samples']} samples")
    for name, key in (("GPU kernel-busy", "gpu_busy_pct"), ("host CPU busy", "cpu_busy_pct")):
        if on[key]:
            print(f"{name}: {on[key]['median']:g}% (median; 90th percentile {on[key]['p90']:g}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
