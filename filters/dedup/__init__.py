"""Batch filters over whole sets: near-duplicates within the set, contamination against KernelBench."""
