"""The grader's code that runs inside a sandbox worker, in the same process as the solution it judges."""
