# task: linear_gelu
# expect: tampering
# runtime: tampering
# Patches torch at import, then fails to build: its failure must not hide the patch (nor leave it to the next task).
import torch
import torch.nn as nn

torch.nn.functional.gelu = torch.relu


class ModelNew(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        raise ValueError("never built")
