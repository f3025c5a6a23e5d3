"""Execute filter `degenerate_output`, visibility rule: the consumer's check tells the task's output from cheap
wrong answers.

The environment that consumes a task rewards a kernel whose output matches the reference at atol = rtol = 1e-2.
Where nearly every output value is below atol (softmax over long rows, cosine similarity of very wide random
vectors), all zeros pass almost everywhere; where values concentrate (distances of high-dimensional random
vectors), one constant does; where the output hardly depends on the input, another draw's output does. For each
of the three answers this check measures the share of output values, over every input draw, that the check
accepts, records the shares on the verdict, and rejects the task when one of them reaches MAX_ACCEPTED_SHARE
(docs/grader_proof.md has the distribution the threshold was chosen from).
"""

from __future__ import annotations

from filters.base import Filter, Verdict
from filters.execute.task_run import TaskRun
from filters.execute.tensors import accepted_shares

# A task is kept only if each cheap wrong answer fails the check on more than 1 - MAX_ACCEPTED_SHARE of its values.
MAX_ACCEPTED_SHARE = 0.9
WRONG_ANSWERS = {"zero": "all zeros", "constant": "a constant (another draw's median)",
                 "stale": "another input draw's output"}


class VisibleOutputCheck(Filter):
    name = "visible"
    reads = ("outputs",)

    def filter(self, run: TaskRun) -> Verdict:
        tolerance = run.tolerance
        shares = accepted_shares(run.outputs, tolerance.atol, tolerance.rtol)
        metrics = {f"accept_{answer}_share": round(share, 6) for answer, share in shares.items()}
        metrics.update(dtype=tolerance.dtype, atol=tolerance.atol, rtol=tolerance.rtol)   # the tolerance these shares are at
        answer = max(shares, key=shares.__getitem__)
        if shares[answer] >= MAX_ACCEPTED_SHARE:
            return Verdict.reject(
                "degenerate_output",
                f"visibility rule: {WRONG_ANSWERS[answer]} passes the check at {tolerance.text()} on "
                f"{shares[answer]:.1%} of the output values over {len(run.outputs)} input draws "
                f"(at most {MAX_ACCEPTED_SHARE:.0%} allowed)", **metrics)
        return Verdict.ok(**metrics)
