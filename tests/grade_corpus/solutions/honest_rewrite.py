# task: linear_gelu
# expect: ok
# An equivalent rewrite: the same parameters (created in the same order), GELU written out, a backend setting of its
# own (settings are put back before the reference runs).
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.backends.cudnn.benchmark = True


class ModelNew(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.linear = nn.Linear(features, hidden)

    def forward(self, x):
        y = F.linear(x, self.linear.weight, self.linear.bias)
        return 0.5 * y * (1.0 + torch.erf(y / math.sqrt(2.0)))
