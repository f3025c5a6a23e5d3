"""Built-in torch operators (nn modules and torch / F functions) that compose into chains; `SPECS` is the full list."""

from __future__ import annotations

from opgen.vocab import (
    ops_activation,
    ops_conv,
    ops_elementwise,
    ops_embedding,
    ops_gemm,
    ops_loss,
    ops_norm,
    ops_pooling,
    ops_reduction,
    ops_sequence,
    ops_shape,
)
from opgen.vocab.spec import OpSpec

CATEGORY_MODULES = (ops_gemm, ops_conv, ops_norm, ops_activation, ops_pooling, ops_reduction, ops_elementwise,
                    ops_shape, ops_sequence, ops_loss, ops_embedding)

SPECS: list[OpSpec] = [spec for module in CATEGORY_MODULES for spec in module.SPECS]
