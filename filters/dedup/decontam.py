"""Contamination against KernelBench: equal operator signature (levels 1-3) or Model-class shingle Jaccard."""

from __future__ import annotations

from dataclasses import dataclass

from kernels_ref.fingerprint import Fingerprint
from kernels_ref.index import ReferenceIndex

# Chosen by scripts/decontam_curve.py (docs/decontamination.md): recall on disguised copies vs honest tasks.
CONTAMINATION_THRESHOLD = 0.65


@dataclass(frozen=True)
class Contamination:
    """The nearest KernelBench problem of one task and which rule, if any, flags it."""

    kb_nearest: str
    kb_similarity: float
    kb_signature_match: str | None   # a level 1-3 problem with the same operator signature
    rule: str | None                 # "signature", "jaccard", or None when clean

    def metrics(self) -> dict:
        return {"kb_nearest": self.kb_nearest, "kb_similarity": round(self.kb_similarity, 4),
                "kb_signature_match": self.kb_signature_match, "contamination_rule": self.rule}


def check_contamination(prints: list[Fingerprint], index: ReferenceIndex,
                        threshold: float = CONTAMINATION_THRESHOLD) -> list[Contamination]:
    """One Contamination per fingerprint; the signature rule wins when both rules fire."""
    nearest_by_shingles: dict[frozenset[int], tuple[int, float]] = {}
    results = []
    for print_ in prints:
        shingles = print_.model_shingles
        if shingles not in nearest_by_shingles:
            nearest_by_shingles[shingles] = index.nearest(shingles)
        best, similarity = nearest_by_shingles[shingles]
        matches = index.signature_match(print_.signature)
        match = None
        if matches:  # the signature twin most similar in text
            scores = index.similarities(shingles)
            match = index.names[max(matches, key=lambda i: (scores[i], -i))]
        rule = "signature" if match else "jaccard" if similarity >= threshold else None
        results.append(Contamination(index.names[best], similarity, match, rule))
    return results
