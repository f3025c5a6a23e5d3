"""CUDA-Agent's milestone reward on every grade (honest, slow, wrong and cheating solutions), and `opgen.reward` on a
batch of completions as TRL and verl pass them: code blocks pulled out, bad completions scored -1, never raised."""

from __future__ import annotations

import json

import pytest

import opgen
from opgen.errors import UsageError
from opgen.grading.completions import extract_code
from opgen.grading.milestones import milestone_reward
from opgen.grading.rewards import tasks_from_columns
from opgen.grading.summary import summarize_grades
from opgen.grading.tasks import reference_solution
from tests.kernel_solutions import DIAGONAL, HONEST, LINEAR_GELU, MATMUL_DIAGONAL, SLOW, WRONG

# Timed on the CPU with the host clock, a short plan: the reward's timed path runs, not the GPU's figures.
CPU_TIMED = {"device": "cpu", "timing": True, "warmups": 1, "trials": 5, "min_trials": 5}
LINEAR = LINEAR_GELU.read_text()


def fenced(code: str, before: str = "Here is my solution.") -> str:
    return f"{before}\n\n```python\n{code}\n```\n"


@pytest.mark.parametrize("grade, reward", [
    ({"correct": False, "speedup_eager": 10.0, "speedup_compile": 10.0}, -1.0),
    ({"correct": True}, 1.0),                                                   # not timed
    ({"correct": True, "speedup_eager": 1.05, "speedup_compile": 2.0}, 1.0),    # 95.2% of eager's time: not > 5%
    ({"correct": True, "speedup_eager": 1.06, "speedup_compile": None}, 2.0),   # no compile baseline: 2 at most
    ({"correct": True, "speedup_eager": 1.5, "speedup_compile": 1.0}, 2.0),
    ({"correct": True, "speedup_eager": 0.8, "speedup_compile": 1.5}, 1.0),     # eager first, as CUDA-Agent's
    ({"correct": True, "speedup_eager": 1.5, "speedup_compile": 1.06}, 3.0),
])
def test_the_milestones(grade, reward):
    assert milestone_reward(grade) == reward


def test_milestone_rewards_of_honest_slow_wrong_and_cheating_solutions(kernel_builds):
    def graded(code, task=LINEAR_GELU, **options):
        return opgen.grade(solution_code=code, task=task, extensions_dir=str(kernel_builds), **{**CPU_TIMED, **options})

    fast = graded(DIAGONAL, MATMUL_DIAGONAL)   # one dot product a row where eager computes the whole n x n product
    assert (fast["reason"], fast["reward"]) == ("ok", 2.0) and fast["speedup_eager"] > 1.2, fast
    honest = graded(HONEST)
    assert honest["reason"] == "ok" and honest["reward"] == milestone_reward(honest) >= 1.0, honest
    # the same kernel run 20,000 times a call: about 100 ms, where eager takes 0.03 ms (15 ms on a loaded 2-core host)
    slow = graded(SLOW)
    assert (slow["reason"], slow["reward"]) == ("ok", 1.0) and slow["speedup_eager"] < 0.5, slow
    wrong = graded(WRONG)   # the bias left out
    assert (wrong["reason"], wrong["reward"], wrong.get("speedup_eager")) == ("mismatch", -1.0, None)
    cheat = graded(reference_solution(LINEAR), kernels_only=True)   # PyTorch's own operators under the rule
    assert (cheat["reason"], cheat["reward"]) == ("torch_operator", -1.0)
    zeros = graded("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
                   "    def __init__(self, features, hidden):\n        super().__init__()\n        self.hidden = hidden\n"
                   "    def forward(self, x):\n        return torch.zeros(x.shape[0], self.hidden)\n")
    assert (zeros["reason"], zeros["reward"]) == ("mismatch", -1.0)
    figures = summarize_grades([fast, honest, slow, wrong, cheat, zeros], tasks=6)
    assert figures["mean_reward"] == pytest.approx(sum(g["reward"] for g in (fast, honest, slow, wrong, cheat,
                                                                            zeros)) / 6)


def test_code_blocks_are_pulled_out_of_strings_and_conversations():
    text = fenced("class ModelNew: pass", before="A draft:\n```python\nclass Model: pass\n```\n```cpp\nint x;\n```")
    assert extract_code(text) == "class ModelNew: pass\n"
    conversation = [{"role": "user", "content": "solve"}, {"role": "assistant", "content": text}]
    assert extract_code(conversation) == extract_code([{"role": "assistant", "content": [{"type": "text",
                                                                                          "text": text}]}])
    assert extract_code("no code here") is None and extract_code("```python\nunclosed") is None
    assert extract_code(None) is None and extract_code(42) is None


def test_a_batch_of_completions_as_trl_passes_them(kernel_builds):
    hang = ("import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def __init__(self, *args):\n"
            "        super().__init__()\n    def forward(self, x):\n        while True:\n            pass\n")
    completions = [
        fenced(HONEST),                                                  # honest, untimed on the CPU: 1
        [{"role": "assistant", "content": fenced(reference_solution(LINEAR))}],   # conversational, correct: 1
        "I would fuse the linear and the gelu, but here is no code.",     # no code block
        fenced("class ModelNew(nn.Module:\n    pass"),                   # broken code
        fenced(WRONG),                                                   # wrong values
        fenced("import os\nos._exit(1)\nclass ModelNew: pass"),          # what the sandbox forbids
        fenced(hang),                                                    # hangs: past the time limit
    ]
    # The time limit, which the hanging completion waits out and the honest ones must finish inside: ten times an
    # honest grade's seconds in its worker here (0.6-0.9 s on a fast CPU, several times that on a slow or loaded one),
    # 6 s at least
    honest = opgen.grade(solution_code=HONEST, task_code=LINEAR, device="cpu", extensions_dir=str(kernel_builds))
    assert honest["reason"] == "ok", honest
    limit = max(6.0, 10 * honest["worker_s"])
    reward = opgen.reward_function(device="cpu", timeout_s=limit, extensions_dir=str(kernel_builds))
    assert reward.__name__ == "opgen_reward"   # TRL logs a reward function by its name
    n = len(completions)
    rewards = reward(prompts=["p"] * n, completions=completions, code=[LINEAR] * n, id=[f"t{i}" for i in range(n)],
                     atol=[1e-2] * n, seed=[0] * n, step=3, run_name="run", trainer_state=None,
                     completion_ids=[[1, 2]] * n)
    assert rewards == [1.0, 1.0, -1.0, -1.0, -1.0, -1.0, -1.0]
    assert all(isinstance(value, float) for value in rewards)


def test_opgen_reward_itself_takes_the_trainers_call(kernel_builds, monkeypatch):
    monkeypatch.setenv("OPGEN_EXTENSIONS_DIR", str(kernel_builds))   # the default options find the session's build
    assert opgen.reward(["p", "p"], [fenced(HONEST), "```python\n```"], code=[LINEAR] * 2, id=["a", "b"]) == [1.0, -1.0]
    with pytest.raises(UsageError, match="needs its task"):   # no task for the completions: bad input, not a score
        opgen.reward(["p"], [fenced(HONEST)])


def test_verl_shapes_and_tasks_by_id(tmp_path, kernel_builds):
    options = {"device": "cpu", "extensions_dir": str(kernel_builds)}
    assert opgen.compute_score("opgen", fenced(HONEST), LINEAR, {"atol": 1e-2}, **options) == 1.0
    assert opgen.compute_score("opgen", "no code", LINEAR, None, **options) == -1.0
    dataset = tmp_path / "tasks.jsonl"
    dataset.write_text(json.dumps({"id": "t-linear", "code": LINEAR, "eager_ms": 1.5}) + "\n")
    scores = opgen.compute_score_batch(["opgen"] * 2, [fenced(HONEST), fenced(WRONG)], ["t-linear", "t-linear"],
                                       None, dataset=str(dataset), **options)
    assert scores == [1.0, -1.0]
    rows = tasks_from_columns(2, {"id": ["t-linear"] * 2, "seed": [0, 0]}, dataset=str(dataset))
    assert [row["eager_ms"] for row in rows] == [1.5, 1.5] and rows[0]["code"] == LINEAR
    with pytest.raises(UsageError, match="needs its task"):
        tasks_from_columns(2, {"id": ["t-linear"] * 2})
    with pytest.raises(UsageError, match="no task with id"):
        opgen.compute_score("opgen", fenced(HONEST), "t-missing", {"dataset": str(dataset)}, **options)
