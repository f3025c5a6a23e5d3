"""opgen: builds KernelBench-format GPU-kernel training tasks, filtered, decontaminated and timed."""

from opgen.version import __version__

__all__ = ["__version__"]
