"""The grader-proof audit of a set of tasks, from their rows: tasks whose output accepts all zeros, a constant or
another draw's output on at least a share of its values, and same-shape twins (the same family chain on the same
input shapes), with the parameters that tell each pair apart."""

from __future__ import annotations

import collections
import json

ANSWERS = ("zero", "constant", "stale")


def node_params(row: dict) -> list[dict]:
    """Each operator node's parameters, in chain order, from the row's graph."""
    graph = json.loads(row["graph"])
    nodes = [node for node in graph["nodes"] if node.get("kind") == "op"]
    return [dict(node.get("params") or {}, op=node.get("op")) for node in nodes]


def differing(a: dict, b: dict) -> dict[str, tuple]:
    """Parameter name -> (value in a, value in b) for each operator position where they differ."""
    out = {}
    for index, (x, y) in enumerate(zip(node_params(a), node_params(b))):
        for key in sorted(set(x) | set(y)):
            if x.get(key) != y.get(key):
                out[f"op{index}.{key}"] = (x.get(key), y.get(key))
    return out


def within_twice(a: list, b: list) -> bool:
    """The same number of inputs of the same ranks, every dimension within a factor of 2."""
    return len(a) == len(b) and all(len(x) == len(y) and all(max(p, q) <= 2 * min(p, q) for p, q in zip(x, y))
                                    for x, y in zip(a, b))


def audit(rows: list[dict], share: float) -> dict:
    """The tasks at or over `share` of accepted wrong answers, the same-shape twins, the near pairs (same chain, every
    dimension within 2x, other shapes), and the highest accepted share."""
    over = [r["id"] for r in rows if max(r.get(f"accept_{a}_share") or 0.0 for a in ANSWERS) >= share]
    groups = collections.defaultdict(list)
    for row in rows:
        groups[(tuple(row["families"]), json.dumps(row["input_shapes"]))].append(row)
    twins = [(a["id"], b["id"], differing(a, b)) for group in groups.values()
             for i, a in enumerate(group) for b in group[i + 1:]]
    chains = collections.defaultdict(list)
    for row in rows:
        chains[tuple(row["families"])].append(row)
    near = [(a["id"], b["id"], differing(a, b)) for group in chains.values()
            for i, a in enumerate(group) for b in group[i + 1:]
            if within_twice(a["input_shapes"], b["input_shapes"]) and a["input_shapes"] != b["input_shapes"]]
    return {"tasks": len(rows), "share": share, "over_share": over, "twins": twins, "near": near,
            "max_share": max((max(r.get(f"accept_{a}_share") or 0.0 for a in ANSWERS) for r in rows), default=0.0)}
