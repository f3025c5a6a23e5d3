"""Benchmark: sampling throughput (graph + render + AST ops) and meta-device analysis throughput, one core."""

from __future__ import annotations

import time
import warnings

from opgen.sample.analyze import analyze_code
from opgen.sample.render import render
from opgen.sample.sampler import sample_graph
from opgen.taskcode.ops import ops_from_code
from opgen.vocab import cached_vocabulary


def main(n_sample: int = 5000, n_analyze: int = 500, seed: int = 1) -> dict:
    warnings.filterwarnings("ignore")
    vocab = cached_vocabulary()
    analyze_code(render(sample_graph(seed, 0, "smoke", vocab), vocab))  # imports and first-call costs
    start = time.perf_counter()
    codes = []
    for index in range(n_sample):
        code = render(sample_graph(seed, index, "smoke", vocab), vocab)
        ops_from_code(code)
        codes.append(code)
    sampling = n_sample / (time.perf_counter() - start)
    start = time.perf_counter()
    for code in codes[:n_analyze]:
        analyze_code(code)
    analysis = n_analyze / (time.perf_counter() - start)
    print(f"sampling (sample + render + AST ops), 1 core: {sampling:8.0f} candidates/s   (goal >= 500)")
    print(f"fake-tensor (meta) analysis, 1 core:          {analysis:8.1f} candidates/s   (goal >= 50)")
    return {"sampling_per_s": sampling, "analysis_per_s": analysis}


if __name__ == "__main__":
    main()
