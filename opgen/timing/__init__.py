"""CUDA (or CPU) timing of tasks: the driver that spreads tasks over GPUs, and the in-worker measurement."""
