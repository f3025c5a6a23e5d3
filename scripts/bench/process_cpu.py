"""Where a command's CPU seconds go, process by process: `python scripts/bench/process_cpu.py -- COMMAND ...`.

Runs COMMAND, samples the processes on the machine (`/proc/<pid>/stat`) every `--every` seconds while it runs, and
prints the CPU seconds of COMMAND and its descendants (each seen while its parent was known to be one), grouped by
kind: sandbox zygotes, the workers they forked, Python interpreters by their first arguments, and other programs
(compilers) by name. A process that lives less than one sampling interval may be missed; the busy CPU-seconds of the
whole machine (`/proc/stat`) are printed beside the sum, so the gap is visible. Linux only.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    fields = [int(value) for value in open("/proc/stat").readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / TICK   # all but idle and iowait


def sample(seen: dict[tuple[int, float], list], ours: set[int]) -> None:
    """Each descendant's parent, first command line and most CPU seconds so far, by (pid, start time); `ours`, the
    pids known to descend from the command, grows with the children seen here."""
    for pid in sorted(int(name) for name in os.listdir("/proc") if name.isdigit()):   # lower pids first: a parent, mostly, before its children
        try:
            stat = open(f"/proc/{pid}/stat").read()
            command = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        program, rest = stat.split("(", 1)[1].rsplit(")", 1)
        fields = rest.split()
        ppid = int(fields[1])
        if pid not in ours and ppid not in ours:
            continue
        ours.add(pid)
        key = (pid, int(fields[19]) / TICK)
        cpu_s = (int(fields[11]) + int(fields[12])) / TICK
        entry = seen.setdefault(key, [ppid, command.strip(), 0.0, program])
        entry[1] = entry[1] or command.strip()
        entry[2] = max(entry[2], cpu_s)


def kind(ppid: int, command: str, program: str, zygotes: set[int]) -> str:
    if "--zygote" in command:
        return "forked sandbox worker" if ppid in zygotes else "sandbox zygote"
    words = command.split()
    if words and "python" in os.path.basename(words[0]):
        return "python " + " ".join(words[1:4])[:80]
    return program


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=0.25, help="seconds between samples")
    parser.add_argument("--top", type=int, default=20, help="kinds to print")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    seen: dict[tuple[int, float], list] = {}
    busy_before, wall_before = machine_busy_s(), time.monotonic()
    process = subprocess.Popen(command)
    ours = {process.pid}
    while process.poll() is None:
        sample(seen, ours)
        time.sleep(args.every)
    wall_s, busy_s = time.monotonic() - wall_before, machine_busy_s() - busy_before
    zygotes = {pid for (pid, _), (_, command_line, _, _) in seen.items() if "--zygote" in command_line}
    totals: collections.Counter = collections.Counter()
    counts: collections.Counter = collections.Counter()
    for ppid, command_line, cpu_s, program in seen.values():
        name = kind(ppid, command_line, program, zygotes)
        totals[name] += cpu_s
        counts[name] += 1
    print(f"exit {process.returncode}; {wall_s:.1f} s wall; {busy_s:.1f} busy CPU-seconds on the machine, "
          f"{sum(totals.values()):.1f} in the processes sampled")
    for name, cpu_s in totals.most_common(args.top):
        print(f"{cpu_s:8.1f} s {counts[name]:5d} x  {name}")
    return process.returncode


if __name__ == "__main__":
    sys.exit(main())
