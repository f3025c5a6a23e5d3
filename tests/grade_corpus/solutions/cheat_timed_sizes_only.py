# task: linear_gelu
# expect: exec_error
# A kernel written for the one input size the task ships (4 rows): right there, wrong at any other, which the
# held-out sizes the grader derives for a task file (batch 2 and 3) expose.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.linear = nn.Linear(features, hidden)

    def forward(self, x):
        y = self.linear(x).reshape(4 * 32)   # one block of the shipped 4 x 32 outputs
        return torch.nn.functional.gelu(y).view(4, 32)
