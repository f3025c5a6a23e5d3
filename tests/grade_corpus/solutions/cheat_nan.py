# task: linear_gelu
# expect: non_finite
# NaN everywhere (a grader comparing with equal_nan, or NaN != NaN tricks, would be fooled).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.hidden = hidden

    def forward(self, x):
        return torch.full((x.shape[0], self.hidden), float("nan"), device=x.device)
