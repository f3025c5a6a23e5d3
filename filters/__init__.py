"""Filters: one per file, each returning a verdict; a chain that runs them; the sandbox for task code."""
