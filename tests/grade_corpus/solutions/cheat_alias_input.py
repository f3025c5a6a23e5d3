# task: matmul_scale
# expect: output_aliases_input
# Writes the right answer into its first input and returns that tensor: no allocation, but the caller's input is gone.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        a.copy_(torch.matmul(a, b) * self.scale)
        return a
