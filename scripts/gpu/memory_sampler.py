"""Sample, every few seconds until killed, the host and GPU memory of a build's sandbox workers into a JSONL file.

Why a worker passes the pool's resident-memory limit on a GPU machine, and how close the checks run the GPU's memory
to full, are questions of what each process holds while it runs; the run folder keeps only peaks. Whether the GPU or the host's cores are
the bottleneck is a question of how busy each is. One line per sample: {"t": seconds since start, "gpu_used_mb":
the device's, "gpu_busy_pct": the share of nvidia-smi's last sample period in which a kernel ran, "cpu_busy_pct":
the host's cores busy since the last sample, "workers": [{"pid", "rss_mb", "anon_mb", "file_mb", "shmem_mb",
"gpu_mb"}, ...]} for every process of the sandbox's worker module (the breakdown from
/proc/PID/smaps_rollup: anonymous memory is the task's own; file and shared mappings are libraries and the driver's).

    python3 scripts/gpu/memory_sampler.py OUT.jsonl [--every 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opgen.sandbox.quiet import WORKER_MODULE  # noqa: E402


def gpu_memory_by_pid() -> tuple[dict[int, int], int | None, int | None]:
    """Each compute process's GPU memory (MB), the devices' used memory and the busiest one's kernel-busy percent,
    from nvidia-smi; empty and None without one."""
    def query(what: str) -> list[list[str]]:
        try:
            text = subprocess.run(["nvidia-smi", f"--query-{what}", "--format=csv,noheader,nounits"],
                                  capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            return []
        return [[cell.strip() for cell in line.split(",")] for line in text.splitlines() if line.strip()]

    by_pid = {int(row[0]): int(row[1]) for row in query("compute-apps=pid,used_memory")
              if len(row) == 2 and row[0].isdigit() and row[1].isdigit()}
    device = [row for row in query("gpu=memory.used,utilization.gpu") if len(row) == 2 and row[0].isdigit()]
    used = sum(int(row[0]) for row in device) if device else None
    busy = [int(row[1]) for row in device if row[1].isdigit()]
    return by_pid, used, (max(busy) if busy else None)


def rollup_mb(pid: int) -> dict[str, float]:
    """Resident memory of a process by kind, in MB, from /proc/PID/smaps_rollup (empty if it is gone)."""
    fields = {"Rss:": "rss_mb", "Anonymous:": "anon_mb", "Shared_Clean:": "file_mb", "Private_Clean:": "file_mb",
              "RssShmem:": "shmem_mb"}
    found: dict[str, float] = {}
    try:
        lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and parts[0] in fields:
            key = fields[parts[0]]
            found[key] = round(found.get(key, 0.0) + int(parts[1]) / 1024, 1)
    return found


def sample(start: float) -> dict:
    gpu_by_pid, gpu_used, gpu_busy = gpu_memory_by_pid()
    workers = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        if WORKER_MODULE not in " ".join(process.info.get("cmdline") or ()):
            continue
        pid = process.info["pid"]
        workers.append({"pid": pid, **rollup_mb(pid), "gpu_mb": gpu_by_pid.get(pid)})
    return {"t": round(time.time() - start, 1), "gpu_used_mb": gpu_used, "gpu_busy_pct": gpu_busy,
            # since the previous call (the first call: since the sampler was imported)
            "cpu_busy_pct": psutil.cpu_percent(interval=None), "workers": workers}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the JSONL file (appended to)")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    args = parser.parse_args()
    start = time.time()
    with open(args.out, "a", encoding="utf-8") as out:
        while True:
            out.write(json.dumps(sample(start)) + "\n")
            out.flush()
            time.sleep(args.every)


if __name__ == "__main__":
    main()
