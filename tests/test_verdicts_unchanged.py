"""Verdict equality: the execute checks give the committed candidate set (tests/verdicts/candidates.jsonl) the
verdicts recorded in tests/verdicts/expected_cpu.json, candidate by candidate, so a change that makes the checks
cheaper leaves every (reason, stage) as it was. An intended change of verdicts is recorded again
(docs/development.md, "Verdict equality").

A compile on the CPU costs seconds a candidate, so the compile check runs on COMPILED only (both of the set's
compile rejections and three kept candidates of one, three and five operators), in one worker; the others run every
check before it, and one the compile check kept is expected kept by the runtime check, the last one run. The replay
of a GPU build's recorded verdicts (scripts/analysis/record_verdicts.py replay) runs the compile check on every
candidate.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "analysis"))

from record_verdicts import Settings, read_candidates, read_expected, run_checks, verdict_of, verdict_text  # noqa: E402

from filters.execute import STAGE_NAMES  # noqa: E402

VERDICTS = Path(__file__).parent / "verdicts"
COMPILED = ("tests/bad_tasks/compile_error__broken_cxx_config.py",
            "tests/bad_tasks/compile_mismatch__compiler_branch.py",
            "sampler seed 0 smoke #8", "sampler seed 0 smoke #56", "sampler seed 0 smoke #130")
BEFORE_COMPILE = tuple(name for name in STAGE_NAMES if name != "compile")


def recorded() -> tuple[dict[str, dict], dict[str, dict], Settings]:
    """The candidates and their recorded verdicts, both by id, and the settings the verdicts were recorded with."""
    expected = read_expected(VERDICTS / "expected_cpu.json")
    assert expected is not None, "tests/verdicts/expected_cpu.json is not an expected-verdicts file"
    rows, settings = expected
    return read_candidates(VERDICTS / "candidates.jsonl"), {row["id"]: row for row in rows}, settings


def expected_with(row: dict, checks: tuple[str, ...]) -> tuple[str | None, str | None]:
    """The recorded verdict as `checks` give it, which leave out the last check at most (compile): a verdict that
    check decided (a keep too) is a keep by the last check run."""
    reason, stage = verdict_of(row)
    if stage in checks or stage == "sandbox":
        return reason, stage
    return None, checks[-1]


def test_the_set_holds_kept_candidates_and_rejections_by_several_checks():
    candidates, verdicts, settings = recorded()
    assert settings.device == "cpu" and set(verdicts) == set(candidates)
    assert 20 <= len(candidates) <= 40
    kept = [row for row in verdicts.values() if row["reason"] is None]
    assert len(kept) >= 10 and {row["stage"] for row in kept} == {"compile"}
    rejecting = {row["stage"] for row in verdicts.values() if row["reason"] is not None}
    assert {"sandbox", "eager", "finite", "determinism", "degenerate", "visible", "trivial", "operator_work",
            "compile"} <= rejecting
    sources = {row["source"]: row for row in verdicts.values()}
    assert set(COMPILED) <= set(sources)
    compile_rejections = {row["source"] for row in verdicts.values() if row["stage"] == "compile" and row["reason"]}
    assert compile_rejections <= set(COMPILED)
    assert {sources[name]["reason"] for name in compile_rejections} == {"compile_error", "compile_mismatch"}
    assert sum(sources[name]["reason"] is None for name in COMPILED) == 3


@pytest.mark.heavy
def test_every_candidate_gets_its_recorded_verdict():
    candidates, verdicts, settings = recorded()
    compiled = [record for record in candidates.values() if record["source"] in COMPILED]
    rest = [record for record in candidates.values() if record["source"] not in COMPILED]
    # one worker compiles: a second would pay inductor's first compile (~15 CPU seconds) again
    got = {**run_checks(compiled, settings, workers=1),
           **run_checks(rest, settings, workers=2, checks=BEFORE_COMPILE)}
    changed = {}
    for task, row in verdicts.items():
        checks = STAGE_NAMES if row["source"] in COMPILED else BEFORE_COMPILE
        want, line = expected_with(row, checks), got[task]
        if verdict_of(line) != want:
            detail = (line.get("detail") or "").splitlines()[:1]
            now = verdict_text(verdict_of(line)) + (f": {detail[0][:200]}" if detail else "")
            was = verdict_text(verdict_of(row))
            if want != verdict_of(row):
                was += f" ({verdict_text(want)} without compile)"
            changed[f"{row['source']} ({task})"] = f"recorded {was}, now {now}"
    assert changed == {}, "verdicts changed (an intended change is recorded again: docs/development.md):\n" + \
        "\n".join(f"  {candidate}: {what}" for candidate, what in changed.items())
