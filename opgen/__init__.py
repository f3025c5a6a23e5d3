"""opgen: builds KernelBench-format GPU-kernel training tasks, filtered, decontaminated and timed."""

__version__ = "0.1.0"
