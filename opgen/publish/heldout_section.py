"""The dataset card's section on held-out input sizes (opgen/heldout/): how many tasks hold how many, and how to
use them."""

from __future__ import annotations

SECTION_START, SECTION_END = "<!-- held-out:start -->", "<!-- held-out:end -->"


def held_out_counts(rows: list[dict]) -> dict[int, int]:
    """Tasks by how many held-out configurations they hold (a row the stage has not seen counts as 0)."""
    counts: dict[int, int] = {}
    for row in rows:
        counts[row.get("held_out_count") or 0] = counts.get(row.get("held_out_count") or 0, 0) + 1
    return dict(sorted(counts.items()))


def held_out_section(rows: list[dict]) -> str:
    """The card's section on held-out sizes: how many tasks hold how many configurations, and how to use them."""
    counts = held_out_counts(rows)
    notes: dict[str, int] = {}
    for row in rows:
        if row.get("held_out_note"):
            key = row["held_out_note"].split(":")[0][:80]
            notes[key] = notes.get(key, 0) + 1
    lines = [SECTION_START, "## Held-out sizes", "",
             "Besides the sizes its timings were taken at, each task holds held-out input configurations "
             "(`held_out_sizes`: a JSON list of {size constant: value}), each validated as the task was (eager and "
             "compiled outputs within the tolerance, deterministic, finite, not degenerate, visible to the "
             "grader's check). A grader checks a kernel at every one, so a kernel right only at the timed sizes "
             "fails; trainers never see them timed. Inputs of configuration `i`: "
             "`opgen.taskcode.sizes.held_out_inputs(row['code'], row['held_out_sizes'], i)`, or, without opgen, "
             "exec the task's code, update its module globals with the configuration, and call `get_inputs()`.",
             "", "| configurations | tasks |", "|---:|---:|"]
    lines += [f"| {count} | {tasks} |" for count, tasks in sorted(counts.items(), reverse=True)]
    if notes:
        lines += ["", "Why some hold fewer:", ""]
        lines += [f"- {note}: {count}" for note, count in sorted(notes.items(), key=lambda kv: -kv[1])[:8]]
    return "\n".join([*lines, SECTION_END])
