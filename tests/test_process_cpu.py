"""scripts/bench/process_cpu.py: a command's CPU seconds by process, its children's included, its exit status kept."""

from __future__ import annotations

import sys

from scripts.bench.process_cpu import main

BUSY_CHILD = ("import subprocess, sys; subprocess.run([sys.executable, '-c', "
              "'import time; t = time.process_time()\\nwhile time.process_time() - t < 1.0: pass']); sys.exit(3)")


def test_a_child_s_cpu_seconds_are_counted_and_the_exit_status_kept(capsys):
    assert main(["--every", "0.05", "--", sys.executable, "-c", BUSY_CHILD]) == 3
    out = capsys.readouterr().out
    assert out.startswith("exit 3;")
    child = next(line for line in out.splitlines()[1:] if "import time" in line)
    assert 0.7 <= float(child.split()[0]) <= 1.5   # about the second of CPU the grandchild spun
