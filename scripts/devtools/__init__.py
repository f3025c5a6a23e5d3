"""Developer tools: bad-task shrinking, KernelBench disguises, vocabulary probes (used by tests and scripts)."""
