"""Survival per filter of two or more builds side by side, from their stats.json funnels: a precision against fp32
on the same seed, or one build before and after a change.

    python scripts/analysis/funnel_compare.py fp32=RUN_A bf16=RUN_B [fp16=RUN_C ...] [--json OUT.json]

Each argument is LABEL=PATH (or a PATH, labelled by its folder's name): a run folder, a published build's
stats.json, or the run folder a state preview wrote (scripts/analysis/state_preview.py). Per stage of the funnel, in
the order the builds ran them: the candidates each build's stage saw, how many it kept and the share; then each
build's survival from the draw (candidates sampled, tasks kept) and its rejections by reason.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def read_stats(path: Path) -> dict:
    """A build's stats.json, from a run folder or the file itself; SystemExit with one line when there is none."""
    file = path / "stats.json" if path.is_dir() else path
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise SystemExit(f"funnel_compare: error: no build stats at {file}: {error}") from None


def stage_names(funnels: list[dict]) -> list[str]:
    """Every stage of the funnels, in the order the first build that has each one ran it."""
    names: list[str] = []
    for funnel in funnels:
        for name in funnel.get("stages", {}):
            if name not in names:
                names.append(name)
    return names


def share(kept: int, seen: int) -> float | None:
    return round(kept / seen, 4) if seen else None


def compare(builds: dict[str, dict]) -> dict:
    """Per stage and per build: seen, kept, share; per build: candidates drawn, tasks, survival and rejections."""
    funnels = {label: stats.get("funnel", {}) for label, stats in builds.items()}
    stages = {}
    for name in stage_names(list(funnels.values())):
        stages[name] = {}
        for label, funnel in funnels.items():
            stage = funnel.get("stages", {}).get(name)
            stages[name][label] = None if stage is None else {
                "seen": stage["seen"], "kept": stage["kept"], "share": share(stage["kept"], stage["seen"])}
    overall = {label: {"candidates": stats.get("candidates"), "tasks": stats.get("tasks"),
                       "survival": share(stats.get("tasks") or 0, stats.get("candidates") or 0),
                       "rejected": stats.get("rejected", {})}
               for label, stats in builds.items()}
    return {"stages": stages, "builds": overall}


def markdown(report: dict) -> str:
    labels = list(report["builds"])
    lines = ["| stage | " + " | ".join(f"{label}: seen, kept (share)" for label in labels) + " |",
             "|---|" + "---|" * len(labels)]
    for name, by_build in report["stages"].items():
        cells = []
        for label in labels:
            stage = by_build[label]
            cells.append("—" if stage is None else
                         f"{stage['seen']:,}, {stage['kept']:,} ({stage['share']:.1%})" if stage["share"] is not None
                         else f"{stage['seen']:,}, {stage['kept']:,}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    for label, build in report["builds"].items():
        survival = f"{build['survival']:.1%}" if build["survival"] is not None else "—"
        reasons = ", ".join(f"{reason} {count:,}" for reason, count in sorted(build["rejected"].items(),
                                                                               key=lambda item: -item[1]))
        lines.append(f"{label}: {build['tasks']:,} tasks from {build['candidates']:,} candidates ({survival}); "
                     f"rejected: {reasons or 'none'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("builds", nargs="+", metavar="LABEL=PATH", help="a run folder or stats.json, labelled")
    parser.add_argument("--json", type=Path, help="also write the comparison here")
    args = parser.parse_args(argv)
    builds = {}
    for item in args.builds:
        label, _, path = item.rpartition("=") if "=" in item else ("", "", item)
        path = Path(path)
        builds[label or (path.name if path.is_dir() else path.parent.name)] = read_stats(path)
    report = compare(builds)
    print(markdown(report))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
