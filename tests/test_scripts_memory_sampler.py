"""scripts/gpu/memory_sampler.py: each sandbox worker's resident memory, by kind, in one sample."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from opgen.sandbox.pool import SandboxPool

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts" / "gpu"))
from memory_sampler import sample  # noqa: E402

HELPERS = __name__.rpartition(".")[0] + ".test_sandbox_helpers" if "." in __name__ else "test_sandbox_helpers"


def test_a_sample_lists_each_worker_with_the_memory_it_keeps(tmp_path):
    with SandboxPool(workers=1, timeout_s=30.0, memory_mb=None) as pool:
        def anon_mb_after(mb: int) -> tuple[int, float]:
            pid = pool.run_many(f"{HELPERS}:keep_memory", [{"mb": mb}])[0].value["pid"]
            rows = {row["pid"]: row for row in sample(time.time())["workers"]}
            assert pid in rows   # the pool's worker, found by its module
            assert rows[pid]["gpu_mb"] is None   # no GPU here
            assert rows[pid]["rss_mb"] >= rows[pid]["anon_mb"]
            return pid, rows[pid]["anon_mb"]

        pid, before = anon_mb_after(10)
        same, after = anon_mb_after(300)
        assert same == pid and after >= before + 290   # the task's own memory shows as anonymous
        pids = {pid}

        # the script itself appends samples to its file until stopped
        out = tmp_path / "memory.jsonl"
        sampler = subprocess.Popen([sys.executable, str(REPO / "scripts" / "gpu" / "memory_sampler.py"), str(out),
                                    "--every", "0.2"])
        try:
            deadline = time.time() + 20
            while time.time() < deadline and len(out.read_text().splitlines() if out.exists() else []) < 2:
                time.sleep(0.1)
        finally:
            sampler.kill()
            sampler.wait()
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) >= 2 and lines[1]["t"] > lines[0]["t"]
    assert all(0.0 <= line["cpu_busy_pct"] <= 100.0 for line in lines) and lines[0]["gpu_busy_pct"] is None  # no GPU
    assert pids <= {row["pid"] for row in lines[0]["workers"]}
