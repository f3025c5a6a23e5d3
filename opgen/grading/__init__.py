"""Grading a solution (`ModelNew`) against a task: static scan, sandboxed correctness and timing, the summary."""
