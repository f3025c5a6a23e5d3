"""Running untrusted task code: the worker pool, the worker entry point, the one task loader, torch state, GPUs."""
