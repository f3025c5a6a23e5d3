"""The held-out stage's work on one task, in a sandbox worker: derive candidate configurations, validate each as
the task's timed draw was validated, keep the first that pass."""

from __future__ import annotations

from filters.execute.worker import check_task
from opgen.heldout.derive import candidate_configs
from opgen.sandbox.task import describe
from opgen.taskcode.sizes import NoHeldOutSizes, sized_code

# The checks a held-out configuration must pass: it runs eagerly and compiled within the tolerance, finite and
# deterministic, and its output depends on its input and is visible to the grader's check (the visibility
# rule). Not the runtime window (held-out sizes are never timed) nor the every-operator rule (a property of the
# task, judged at its timed sizes).
CHECKS = ("eager", "finite", "determinism", "degenerate", "visible", "compile")


def held_out_task(payload: dict) -> dict:
    """payload: code, id, device, seed, draws, configs (how many to keep), tries (how many candidates at most).
    Returns {"held_out_sizes": [config, ...], "note": why fewer than wanted or None, "tried": [{"sizes",
    "reason", "detail"}, ...]}."""
    wanted, tries = int(payload["configs"]), int(payload.get("tries") or int(payload["configs"]) + 2)
    try:
        candidates = candidate_configs(payload["code"], tries)
    except NoHeldOutSizes as reason:
        return {"held_out_sizes": [], "note": str(reason), "tried": []}
    except Exception as error:  # noqa: BLE001 - the task's own code failed before any configuration ran
        return {"held_out_sizes": [], "note": f"the task does not run: {describe(error)}"[:300], "tried": []}
    kept, tried = [], []
    for sizes in candidates:
        if len(kept) == wanted:
            break
        tried.append(validate_config(payload, sizes, len(tried)))
        if tried[-1]["reason"] is None:
            kept.append(sizes)
    note = None
    if len(kept) < wanted:
        failed = [f"{_text(t['sizes'])}: {t['reason']}" for t in tried if t["reason"]]
        note = (f"failed: {'; '.join(failed)}" if failed else
                f"only {len(candidates)} configuration(s) of {', '.join(candidates[0]) if candidates else 'its sizes'} "
                f"differ from the timed sizes")
    return {"held_out_sizes": kept, "note": note[:500] if note else None, "tried": tried}


def _text(sizes: dict[str, int]) -> str:
    return ",".join(f"{name}={value}" for name, value in sizes.items())


def validate_config(payload: dict, sizes: dict[str, int], number: int = 0) -> dict:
    """The checks of CHECKS on the task at `sizes`: {"sizes", "reason" (None when it passes), "detail"}."""
    result = check_task({"code": sized_code(payload["code"], sizes), "id": f"{payload.get('id')}@{number}",
                         "device": payload.get("device", "cpu"), "seed": int(payload.get("seed", 0)),
                         "draws": int(payload.get("draws", 3)), "threads": payload.get("threads"), "stages": CHECKS})
    return {"sizes": sizes, "reason": result["reason"], "detail": (result["detail"] or "")[:200] or None}


def check_configs(payload: dict) -> dict:
    """payload: code, id, device, seed, configs (the row's held-out configurations). Validates each again:
    {"results": [{"sizes", "reason", "detail"}, ...]} (`opgen check`)."""
    return {"results": [validate_config(payload, sizes, number) for number, sizes in enumerate(payload["configs"])]}
