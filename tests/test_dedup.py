"""Dedup within a candidate set: exact and renamed copies removed, one deterministic survivor per cluster."""

from __future__ import annotations

import json
import random

import pytest

from filters.dedup.near import dedup_verdicts, near_duplicate_pairs
from kernels_ref import reference_index
from kernels_ref.fingerprint import fingerprint
from opgen.records import task_id
from scripts.devtools.disguise import disguise
from tests.conftest import run_cli, run_main
from tests.test_kernels_ref import KB_JSONL, needs_kb, sampled

pytestmark = needs_kb


@pytest.fixture(scope="module")
def kb_index(tmp_path_factory):
    return reference_index(str(KB_JSONL), cache_dir=tmp_path_factory.mktemp("kbcache"))


@pytest.fixture(scope="module")
def originals(kb_index):
    """Distinct, clean sampler candidates (no KernelBench look-alikes, no duplicates among themselves)."""
    records = sampled(11, 60)
    verdicts = dedup_verdicts(records, reference=kb_index)
    clean = [r for r, v in zip(records, verdicts) if v["keep"]]
    assert len(clean) >= 30
    return clean[:30]


def _injected(originals: list[dict]) -> tuple[list[dict], dict[str, set[str]]]:
    """Originals plus exact, renamed, and renamed+reformatted+redocumented copies; clusters by original id."""
    records = [dict(r, source=f"orig-{i}") for i, r in enumerate(originals)]
    clusters = {r["id"]: {r["id"]} for r in originals}
    rng = random.Random(3)
    for i, original in enumerate(originals[:12]):
        copies = [original["code"],
                  disguise(original["code"], rng, ("rename",)),
                  disguise(original["code"], rng, ("rename", "reformat", "redoc"))]
        for k, code in enumerate(copies[: 1 + i % 3]):
            records.append({"id": task_id(code), "code": code, "source": f"copy-{i}-{k}"})
            clusters[original["id"]].add(task_id(code))
    return records, clusters


def _kept_and_links(verdicts: list[dict]) -> tuple[set[tuple[str, str]], dict[str, str]]:
    kept = {(v["id"], v["source"]) for v in verdicts if v["keep"]}
    links = {v["source"]: v["duplicate_of"] for v in verdicts if v["reason"] == "duplicate"}
    return kept, links


def test_injected_exact_and_renamed_duplicates_are_all_removed(originals, kb_index):
    records, clusters = _injected(originals)
    verdicts = dedup_verdicts(records, reference=kb_index)
    assert [v["source"] for v in verdicts] == [r["source"] for r in records]
    assert not any(v["reason"] == "contaminated" for v in verdicts)
    kept_ids = [v["id"] for v in verdicts if v["keep"]]
    assert len(kept_ids) == len(clusters) == len(set(kept_ids))
    for members in clusters.values():
        survivors = [v for v in verdicts if v["keep"] and v["id"] in members]
        assert len(survivors) == 1
        assert survivors[0]["id"] == min(members)  # smallest id survives
        for verdict in verdicts:
            if verdict["id"] in members and not verdict["keep"]:
                assert verdict["reason"] == "duplicate"
                assert verdict["duplicate_of"] == min(members)
    kinds = {v["duplicate_kind"] for v in verdicts if v["reason"] == "duplicate"}
    assert kinds == {"exact"}  # renaming and layout do not change the normalised code


def test_survivors_do_not_depend_on_input_order_or_run(originals, kb_index):
    records, _ = _injected(originals)
    first = _kept_and_links(dedup_verdicts(records, reference=kb_index))
    again = _kept_and_links(dedup_verdicts(records, reference=kb_index))
    shuffled = records[:]
    random.Random(5).shuffle(shuffled)
    reordered = _kept_and_links(dedup_verdicts(shuffled, reference=kb_index))
    assert first == again == reordered
    # Byte-identical copies share an id: the smaller source survives, whatever comes first.
    exact_pair = [r for r in records if r["source"] in ("orig-0", "copy-0-0")]
    for order in (exact_pair, exact_pair[::-1]):
        verdicts = dedup_verdicts(order, reference=kb_index)
        assert [v["source"] for v in verdicts if v["keep"]] == ["copy-0-0"]


def test_copies_of_existing_records_are_duplicates_and_existing_survive(originals, kb_index):
    existing = originals[:5]
    rng = random.Random(9)
    copies = [{"id": "new-" + str(i), "code": disguise(r["code"], rng, ("rename", "reformat"))}
              for i, r in enumerate(existing)]
    fresh = originals[5:10]
    verdicts = dedup_verdicts(copies + fresh, reference=kb_index, existing=existing)
    assert [v["reason"] for v in verdicts] == ["duplicate"] * 5 + [None] * 5
    assert [v["duplicate_of"] for v in verdicts[:5]] == [r["id"] for r in existing]
    assert len(verdicts) == 10  # existing records get no line


def test_near_duplicates_are_confirmed_by_exact_jaccard(originals):
    code = originals[0]["code"]
    prints = [fingerprint(c) for c in (code, code.replace("return [", "return [\n        ") + "\nEXTRA = 1\n",
                                      originals[1]["code"])]
    pairs = near_duplicate_pairs([p.file_shingles for p in prints], threshold=0.8)
    assert [(i, j) for i, j, _ in pairs] == [(0, 1)]
    assert 0.8 <= pairs[0][2] < 1.0


def test_unparsable_code_gets_a_parse_error_line(kb_index):
    verdicts = dedup_verdicts([{"id": "bad", "code": "class Model(:\n  pass"}], reference=kb_index)
    assert verdicts[0]["reason"] == "parse_error" and verdicts[0]["keep"] is False


def test_cli_writes_one_verdict_per_file_and_reports(tmp_path, originals):
    folder = tmp_path / "tasks"
    folder.mkdir()
    for i, record in enumerate(originals[:6]):
        (folder / f"task_{i}.py").write_text(record["code"])
    (folder / "task_copy.py").write_text(disguise(originals[0]["code"], random.Random(1), ("rename",)))
    sigmoid = KB_JSONL.read_text().splitlines()
    sigmoid_code = next(json.loads(line)["code"] for line in sigmoid if '"21_Sigmoid.py"' in line)
    (folder / "task_sigmoid.py").write_text(sigmoid_code.replace("torch.sigmoid(x)", "x.sigmoid()"))
    out = tmp_path / "verdicts.jsonl"
    result = run_cli("dedup", "--input", str(folder), "--out", str(out), "--reference", str(KB_JSONL),
                     "--cache-dir", str(tmp_path / "cache"))
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 8
    by_source = {line["source"]: line for line in lines}
    assert by_source["task_sigmoid.py"]["reason"] == "contaminated"
    # the copy and its original form one cluster; the survivor is the smaller id, whichever file holds it
    pair = sorted((by_source["task_copy.py"], by_source["task_0.py"]), key=lambda line: line["keep"])
    assert [line["keep"] for line in pair] == [False, True] and pair[0]["reason"] == "duplicate"
    assert pair[0]["duplicate_of"] == pair[1]["id"]
    assert "contaminated: 1 (operator signature" in result.stderr
    assert "duplicate clusters (count x size): 1x2" in result.stderr


def test_cli_bad_reference_is_one_line_exit_2(tmp_path, originals, capsys):
    (tmp_path / "t.py").write_text(originals[0]["code"])
    result = run_main(capsys, "dedup", "--input", str(tmp_path), "--out", str(tmp_path / "o.jsonl"), "--reference",
                     str(tmp_path / "missing.jsonl"))
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "not found" in result.stderr
