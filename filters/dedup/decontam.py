"""Contamination against KernelBench: equal operator or family signature (levels 1-3) or Model-class Jaccard."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kernels_ref.fingerprint import Fingerprint
from kernels_ref.index import ReferenceIndex

# Chosen by scripts/analysis/decontam_curve.py (docs/decontamination.md): recall on disguised copies vs honest tasks.
CONTAMINATION_THRESHOLD = 0.65
RULES = ("signature", "family_signature", "jaccard")  # checked in this order; the first that fires is the rule


@dataclass(frozen=True)
class Contamination:
    """The nearest KernelBench problem of one task and which rule, if any, flags it."""

    kb_nearest: str
    kb_similarity: float
    kb_signature_match: str | None   # a level 1-3 problem with the same operator signature
    kb_family_match: str | None      # a level 1-3 problem with the same family signature
    rule: str | None                 # one of RULES, or None when clean

    @property
    def matched(self) -> str:
        """The problem the rule names: the signature twin, else the family twin, else the nearest."""
        return self.kb_signature_match or self.kb_family_match or self.kb_nearest

    def metrics(self) -> dict:
        return {"kb_nearest": self.kb_nearest, "kb_similarity": round(self.kb_similarity, 4),
                "kb_signature_match": self.kb_signature_match, "kb_family_match": self.kb_family_match,
                "contamination_rule": self.rule}


def check_contamination(prints: list[Fingerprint], index: ReferenceIndex,
                        threshold: float = CONTAMINATION_THRESHOLD,
                        families: Sequence[tuple[str, ...]] | None = None) -> list[Contamination]:
    """One Contamination per fingerprint. `families` overrides each print's family signature (a record's own
    `families` column, made with its run's vocabulary)."""
    nearest_by_shingles: dict[frozenset[int], tuple[int, float]] = {}
    results = []
    for position, print_ in enumerate(prints):
        shingles = print_.model_shingles
        if shingles not in nearest_by_shingles:
            nearest_by_shingles[shingles] = index.nearest(shingles)
        best, similarity = nearest_by_shingles[shingles]
        chain = families[position] if families is not None else print_.families
        signature_match = _twin(index, index.signature_match(print_.signature), shingles)
        family_match = _twin(index, index.family_match(chain), shingles)
        rule = ("signature" if signature_match else "family_signature" if family_match
                else "jaccard" if similarity >= threshold else None)
        results.append(Contamination(index.names[best], similarity, signature_match, family_match, rule))
    return results


def _twin(index: ReferenceIndex, matches: list[int], shingles: frozenset[int]) -> str | None:
    """Of the problems a signature matched, the one most similar in text (None when none matched)."""
    if not matches:
        return None
    scores = index.similarities(shingles)
    return index.names[max(matches, key=lambda i: (scores[i], -i))]
