"""An agent's environment for one task, as CUDA-Agent released beside its dataset: the work folder, its SKILL.md, and
the folder's compile, verify and profile commands (docs/agent.md)."""
