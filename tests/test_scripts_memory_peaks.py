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
