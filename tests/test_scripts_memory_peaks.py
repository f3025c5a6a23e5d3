"""scripts/analysis/memory_peaks.py: each worker's highest sample, and those above the line, highest first."""

from __future__ import annotations

import gzip
import json
import sys

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "scripts" / "analysis"))
import memory_peaks  # noqa: E402


def _worker(pid: int, rss: float, gpu: int | None = None) -> dict:
    return {"pid": pid, "rss_mb": rss, "anon_mb": rss - 200, "file_mb": 200.0, "gpu_mb": gpu}


def test_peaks_over_two_files_keep_each_worker_s_highest_sample(tmp_path, capsys):
    first, second = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl"
    with gzip.open(first, "wt") as out:
        out.write(json.dumps({"t": 0, "workers": [_worker(1, 9000, 700), _worker(2, 500)]}) + "\n")
        out.write(json.dumps({"t": 5, "workers": [_worker(1, 12000, 900), _worker(2, 600)]}) + "\n")
    second.write_text(json.dumps({"t": 0, "workers": [_worker(1, 3000), _worker(3, 8500, 20000)]}) + "\n")
    report = memory_peaks.peaks(memory_peaks.read_samples([first, second]), above_mb=8000)
    assert (report["samples"], report["workers"], report["above"], report["max_rss_mb"]) == (3, 3, 2, 12000)
    assert [(w["pid"], w["rss_mb"], w["anon_mb"], w["gpu_mb"]) for w in report["peaks_above"]] == [
        (1, 12000, 11800, 900), (3, 8500, 8300, 20000)]
    assert memory_peaks.main([str(first), str(second), "--above-mb", "10000"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "3 samples, 3 workers, 1 peaked above 10000 MB resident (highest 12000 MB)")


def test_the_device_s_used_memory_and_busy_shares_over_the_samples(tmp_path, capsys):
    samples = tmp_path / "m.jsonl"
    rows = [{"t": 5 * i, "gpu_used_mb": mb, "gpu_busy_pct": busy, "cpu_busy_pct": cpu, "workers": []}
            for i, (mb, busy, cpu) in enumerate([(60_000, 20, 50.0), (72_000, 40, 70.0), (80_000, 90, 90.0)])]
    rows.append({"t": 20, "gpu_used_mb": None, "workers": []})   # a sample that could not read the device
    samples.write_text("".join(json.dumps(row) + "\n" for row in rows))
    figures = memory_peaks.device(memory_peaks.read_samples([samples]), gpu_above_mb=70_000)
    assert figures["gpu_samples"] == 3 and figures["gpu_above_share"] == 0.667
    assert figures["gpu_used_mb"] == {"median": 72_000, "p90": 72_000, "max": 80_000}
    assert figures["gpu_busy_pct"]["median"] == 40 and figures["cpu_busy_pct"]["median"] == 70.0
    assert memory_peaks.main([str(samples)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-3:] == ["device: 72,000 MB used (median; 90th percentile 72,000, largest 80,000), past 70,000 MB in "
                        "67% of 3 samples", "GPU kernel-busy: 40% (median; 90th percentile 40%)",
                        "host CPU busy: 70% (median; 90th percentile 70%)"]
    # samples without the device (a CPU machine, an older sampler): no device lines
    assert memory_peaks.device([{"workers": []}], 70_000)["gpu_used_mb"] is None
