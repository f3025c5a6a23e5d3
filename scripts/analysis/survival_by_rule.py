"""Survival and runtime-window share of validated candidates, grouped by the prefix of their id (the `mix` and
`uniform` composition rules side by side on the GPU).

    python scripts/analysis/survival_by_rule.py VERDICTS.jsonl [--sampled RULE=N ...]

VERDICTS is `opgen validate --device cuda` output (default window; or its `.partial` log) over candidates whose ids start with their
rule (`mix-ops-...`, `uniform-ops-...`; scripts/gpu/prepare.sh writes them). `--sampled mix=200` names how
many candidates the rule drew before dedup, for survival from the draw. Per rule: candidates validated, kept,
survival, the share inside the window among those whose eager time was measured, and the rejection reasons.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from filters.window import DEFAULT_WINDOW_MS, Window  # noqa: E402
from opgen.jsonl import read_jsonl  # noqa: E402


def read_verdicts(path: Path) -> list[dict]:
    """Verdict lines of a finished output, or of the finished chunks of its `.partial` log (a run cut short)."""
    rows = read_jsonl(path)
    if path.suffix == ".partial":
        return [line for entry in rows if "lines" in entry for line in entry["lines"]]
    return rows


def rule_of(verdict: dict) -> str:
    return str(verdict.get("id") or verdict.get("source") or "").split("-", 1)[0] or "?"


WINDOW = Window(*DEFAULT_WINDOW_MS)


def summarize(verdicts: list[dict], sampled: dict[str, int], window: Window = WINDOW) -> list[str]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for verdict in verdicts:
        groups[rule_of(verdict)].append(verdict)
    lines = ["| rule | sampled | validated | kept | survival (validated) | survival (sampled) | eager timed | "
             "inside 1-100 ms | eager median ms | top rejections |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for rule, group in sorted(groups.items()):
        kept = sum(1 for v in group if v.get("keep"))
        eager = [v["eager_ms_cuda"] for v in group if v.get("eager_ms_cuda") is not None]
        inside = sum(1 for ms in eager if window.contains(ms))
        reasons = Counter(v["reason"] for v in group if not v.get("keep"))
        drawn = sampled.get(rule)
        lines.append(
            f"| {rule} | {drawn or '—'} | {len(group)} | {kept} | {100 * kept / len(group):.1f}% | "
            f"{f'{100 * kept / drawn:.1f}%' if drawn else '—'} | {len(eager)} | "
            f"{f'{100 * inside / len(eager):.1f}%' if eager else '—'} | "
            f"{f'{statistics.median(eager):.3g}' if eager else '—'} | "
            f"{', '.join(f'{reason} {count}' for reason, count in reasons.most_common(4))} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("verdicts", type=Path)
    parser.add_argument("--sampled", nargs="*", default=[], metavar="RULE=N")
    args = parser.parse_args(argv)
    sampled = {rule: int(n) for rule, n in (item.split("=", 1) for item in args.sampled)}
    print("\n".join(summarize(read_verdicts(args.verdicts), sampled)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
