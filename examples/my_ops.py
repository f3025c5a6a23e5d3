"""Example vocabulary plugin: two operators added without editing opgen (`--vocab-plugin examples/my_ops.py`)."""

from opgen.vocab.builders import pick_dim
from opgen.vocab.spec import OpSpec

SPECS = [
    # A functional operator that keeps the shape: only a name, category, phrase and call template.
    OpSpec(name="torch.deg2rad", category="elementwise", phrase="converts degrees to radians",
           call="torch.deg2rad({x})"),
    # A module with a drawn parameter that becomes a Model init argument (`args`).
    OpSpec(name="nn.Softmax2d", category="activation", phrase="applies softmax over channels", ranks=(4,),
           module="nn.Softmax2d()", attr="channel_softmax"),
    # A reduction with a drawn dimension that the forward reads from `self.dim`.
    OpSpec(name="torch.nansum", category="reduction", phrase="sums along a dimension, ignoring NaNs",
           ranks=(2, 3, 4), draw=lambda rng, shape, sizes: {"dim": pick_dim(rng, shape)},
           out_shape=lambda shape, p: shape[:p["dim"]] + shape[p["dim"] + 1:],
           call="torch.nansum({x}, dim={dim})", args=("dim",)),
]
