# task: linear_gelu
# expect: exec_error
# Raises an error that names a broken GPU, hoping to be taken for the machine's fault (no verdict) rather than its own.
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()

    def forward(self, x):
        raise RuntimeError("CUDA error: unknown error")
