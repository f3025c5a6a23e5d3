"""Built-in transformers classes; each is a standalone task built from code-made configs, never from_pretrained."""

from __future__ import annotations

from opgen.vocab.builders import sequence_input
from opgen.vocab.spec import OpSpec

SPECS: list[OpSpec] = [
    OpSpec(name="transformers.LlamaRMSNorm", category="transformers", phrase="applies Llama's RMS normalization",
           ranks=(3,), make_input=sequence_input, standalone=True, attr="norm",
           draw=lambda r, s, z: {"hidden_size": s[-1], "eps": r.choice((1e-5, 1e-6))},
           module="LlamaRMSNorm({hidden_size}, eps={eps})", args=("hidden_size",),
           imports=("from transformers.models.llama.modeling_llama import LlamaRMSNorm",)),
]
