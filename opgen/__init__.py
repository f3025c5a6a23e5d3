"""opgen: builds KernelBench-format GPU-kernel training tasks, filtered, decontaminated and timed."""

from opgen.version import __version__

__all__ = ["__version__", "compute_score", "compute_score_batch", "grade", "reward", "reward_function"]


def grade(*args, **kwargs) -> dict:
    """Grade a solution (`ModelNew`) against a task in a sandboxed worker; see `opgen.grading.api.grade`."""
    from opgen.grading.api import grade as grade_solution

    return grade_solution(*args, **kwargs)


def reward(prompts=None, completions=None, **columns) -> list[float]:
    """TRL-shaped batch reward with the default options: one milestone reward (-1, 1, 2, 3) per completion, its task
    read from the dataset's columns (`code`); see `opgen.grading.rewards` and docs/agent.md."""
    from opgen.grading.rewards import reward_function as make

    return make()(prompts, completions, **columns)


def reward_function(**options):
    """A TRL reward function with options (dataset=..., kernels_only=True, device=..., timeout_s=...)."""
    from opgen.grading.rewards import reward_function as make

    return make(**options)


def compute_score(data_source=None, solution_str="", ground_truth=None, extra_info=None, **kwargs) -> float:
    """verl's reward function: one completion's milestone reward; see `opgen.grading.rewards.compute_score`."""
    from opgen.grading.rewards import compute_score as score

    return score(data_source, solution_str, ground_truth, extra_info, **kwargs)


def compute_score_batch(data_sources=None, solution_strs=(), ground_truths=(), extra_infos=None, **kwargs) -> list:
    """verl's batch reward (BatchRewardManager); see `opgen.grading.rewards.compute_score_batch`."""
    from opgen.grading.rewards import compute_score_batch as scores

    return scores(data_sources, solution_strs, ground_truths, extra_infos, **kwargs)
