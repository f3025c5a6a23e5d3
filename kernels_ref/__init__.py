"""The KernelBench reference corpus: loading it (Hub, checkout, file) and its cached decontamination fingerprints."""

from kernels_ref.index import ReferenceIndex, build_index, problem_name, reference_index
from kernels_ref.load import HUB_ID, load_reference, resolve_reference

__all__ = ["HUB_ID", "ReferenceIndex", "build_index", "load_reference", "problem_name", "reference_index",
           "resolve_reference"]
