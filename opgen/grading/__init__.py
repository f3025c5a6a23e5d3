"""Grading a solution (`ModelNew`) against a task, from the grader's own process: the static scan, the sandbox pools,
the lines and their summary; what runs in the sandbox worker, beside the solution, is `beside_solution/`."""
