"""Grader-proof figures: for KernelBench problems and sampled candidates, run in sandbox workers, the shares of output
values at which all zeros, a constant and another input draw's output pass the consumer's check (atol = rtol = 1e-2),
and whether every operator changes the result; then their distribution and what a threshold rejects.

    python scripts/analysis/grader_shares.py --kernelbench problems.jsonl --candidates c.jsonl --device cuda --out DIR
    python scripts/analysis/grader_shares.py --summarize DIR/shares.jsonl --threshold 0.9      # again, on any machine
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

THRESHOLDS = (0.5, 0.8, 0.9, 0.95, 0.99, 1.0)
ANSWERS = ("zero", "constant", "stale")


def measure(payload: dict) -> dict:
    """In a sandbox worker: eager on draw 0, the further draws, the three shares, the every-operator rule."""
    from filters.base import judge
    from filters.execute.degenerate import DegenerateCheck
    from filters.execute.eager import EagerCheck
    from filters.execute.finite import FiniteCheck
    from filters.execute.operator_work import OperatorWorkCheck
    from filters.execute.task_run import TaskRun
    from filters.execute.tensors import accepted_shares
    from opgen.sandbox.torch_state import isolated_torch_state

    run = TaskRun.from_payload({**payload, "device": payload["device"]})
    run.window = None
    with isolated_torch_state():
        first = judge(run, (EagerCheck(), FiniteCheck()))
        if not first.keep:
            return {"status": first.reason, "detail": (first.detail or "")[:300]}
        degenerate = DegenerateCheck().filter(run)
        if len(run.outputs) != run.draws + 1:
            return {"status": degenerate.reason, "detail": (degenerate.detail or "")[:300]}
        shares = accepted_shares(run.outputs, run.tolerance.atol, run.tolerance.rtol)
        work = OperatorWorkCheck().filter(run)
    return {"status": "ok", "degenerate": degenerate.reason, "shares": shares, "operator_work": work.reason,
            "operator_work_detail": work.detail, "values": sum(t.numel() for t in run.outputs[0])}


def _rows(args) -> list[dict]:
    rows = []
    if args.kernelbench:
        for line in Path(args.kernelbench).read_text().splitlines():
            problem = json.loads(line)
            if problem["level"] in args.levels:
                rows.append({"set": f"kernelbench L{problem['level']}", "name": problem["name"], "code": problem["code"]})
    if args.candidates:
        for line in Path(args.candidates).read_text().splitlines()[:args.limit]:
            record = json.loads(line)
            rows.append({"set": "candidates", "name": record["id"], "code": record["code"],
                         "families": record.get("families"), "ops": record.get("ops")})
    return rows


def run_all(args) -> Path:
    from opgen.sandbox.gpus import gpu_slot_envs
    from opgen.sandbox.pool import SandboxPool

    rows = _rows(args)
    payloads = [{"code": r["code"], "id": r["name"], "device": args.device, "seed": 0, "draws": 3} for r in rows]
    with SandboxPool(args.workers, args.timeout, args.memory_mb, slot_envs=gpu_slot_envs(args.device)) as pool:
        results = pool.run_many("scripts.analysis.grader_shares:measure", payloads, progress=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "shares.jsonl"
    with path.open("w") as handle:
        for row, result in zip(rows, results):
            value = result.value if result.status == "ok" else {"status": result.status, "detail": result.detail[-400:]}
            handle.write(json.dumps({**{k: row.get(k) for k in ("set", "name", "families", "ops")}, **value}) + "\n")
    return path


def summarize(path: Path, threshold: float) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    sets = sorted({r["set"] for r in rows})
    print(f"threshold {threshold}: a task is flagged when one answer passes on at least that share of its values")
    for name in sets:
        group = [r for r in rows if r["set"] == name]
        measured = [r for r in group if r.get("status") == "ok"]
        print(f"\n## {name}: {len(group)} tasks, {len(measured)} measured "
              f"({dict(collections.Counter(r.get('status') for r in group if r.get('status') != 'ok'))} not)")
        for answer in ANSWERS:
            shares = sorted(r["shares"][answer] for r in measured)
            if not shares:
                continue
            quantile = {q: shares[min(len(shares) - 1, int(q * len(shares)))] for q in (0.5, 0.9, 0.95, 0.99)}
            at_least = {t: sum(s >= t for s in shares) for t in THRESHOLDS}
            print(f"  {answer:8s} median {quantile[0.5]:.3f}  p90 {quantile[0.9]:.3f}  p95 {quantile[0.95]:.3f}  "
                  f"p99 {quantile[0.99]:.3f}   tasks at or above: " + ", ".join(f"{t}: {n}" for t, n in at_least.items()))
        worst = [max(r["shares"].values()) for r in measured]
        print("  any answer, tasks at or above: " + ", ".join(f"{t}: {sum(w >= t for w in worst)}" for t in THRESHOLDS))
        flagged = [r for r in measured if max(r["shares"].values()) >= threshold]
        print(f"  flagged at {threshold}: {len(flagged)} of {len(measured)} ({len(flagged) / max(1, len(measured)):.1%})")
        for r in flagged if name.startswith("kernelbench") else flagged[:0]:
            answer = max(r["shares"], key=r["shares"].get)
            print(f"    {r['name']}: {answer} {r['shares'][answer]:.3f}  "
                  + " ".join(f"{a}={r['shares'][a]:.3f}" for a in ANSWERS))
        if not name.startswith("kernelbench"):
            families = collections.Counter(f for r in flagged for f in set(r.get("families") or []))
            totals = collections.Counter(f for r in measured for f in set(r.get("families") or []))
            print("  families of flagged candidates (flagged/measured): "
                  + ", ".join(f"{f} {n}/{totals[f]}" for f, n in families.most_common(15)))
        old = sum(r.get("degenerate") is not None for r in measured)
        print(f"  rejected by the all-draws rule already: {old}")
        work = [r for r in measured if r.get("operator_work")]
        print(f"  every-operator rule rejects: {len(work)}")
        for r in work[:12]:
            print(f"    {r['name']}: {(r.get('operator_work_detail') or '')[:160]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--candidates")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=180)
    parser.add_argument("--memory-mb", type=int, default=24000)
    parser.add_argument("--out", default="data/grader_shares")
    parser.add_argument("--summarize")
    parser.add_argument("--threshold", type=float, default=0.9)
    args = parser.parse_args()
    path = Path(args.summarize) if args.summarize else run_all(args)
    summarize(path, args.threshold)
    return 0


if __name__ == "__main__":
    sys.exit(main())
