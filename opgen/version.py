"""The opgen version, importable from every layer (a build's state records it and refuses another)."""

__version__ = "0.1.0"
