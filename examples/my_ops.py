"""Example vocabulary plugin: three operators added without editing opgen (`--vocab-plugin examples/my_ops.py`)."""

from opgen.vocab.builders import pick_dim
from opgen.vocab.spec import OpSpec

SPECS = [
    # A functional operator that keeps the shape: only a name, category, phrase and call template.
    OpSpec(name="torch.deg2rad", category="elementwise", phrase="converts degrees to radians",
           call="torch.deg2rad({x})"),
    # A module: `module` builds it in __init__ (as self.<attr>); `kernel_size` becomes a Model init argument.
    OpSpec(name="nn.LPPool3d", category="pooling", phrase="applies 3D power-average pooling", ranks=(5,),
           draw=lambda rng, shape, sizes: {"kernel_size": 2} if min(shape[2:]) >= 2 else None,
           out_shape=lambda shape, p: shape[:2] + tuple((d - 2) // 2 + 1 for d in shape[2:]),
           module="nn.LPPool3d(2, {kernel_size})", args=("kernel_size",), attr="lp_pool"),
    # A reduction with a drawn dimension that the forward reads from `self.dim`.
    OpSpec(name="torch.nansum", category="reduction", phrase="sums along a dimension, ignoring NaNs",
           ranks=(2, 3, 4), draw=lambda rng, shape, sizes: {"dim": pick_dim(rng, shape)},
           out_shape=lambda shape, p: shape[:p["dim"]] + shape[p["dim"] + 1:],
           call="torch.nansum({x}, dim={dim})", args=("dim",)),
]
