# task: linear_gelu
# expect: output_format
# hardened
# The right values, wrapped in a tuple where the task returns a tensor: a caller that unpacks the reference's output
# would break on it.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.linear = nn.Linear(features, hidden)

    def forward(self, x):
        return (torch.nn.functional.gelu(self.linear(x)),)
