"""Benchmarks, device scripts and developer tools."""
