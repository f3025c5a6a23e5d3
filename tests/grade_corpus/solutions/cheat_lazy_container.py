# task: pair_of_outputs
# expect: mismatch
# hardened
# Returns a tuple subclass that holds zeros but iterates as the real answer, computed only when the grader reads the
# outputs: after the clock has stopped. The grader reads containers with the built-in types' own methods.
import torch
import torch.nn as nn


class Later(tuple):
    def __new__(cls, compute, placeholder):
        made = super().__new__(cls, placeholder)
        made.compute = compute
        return made

    def __iter__(self):
        return iter(self.compute())


class ModelNew(nn.Module):
    def forward(self, a, b):
        zeros = torch.zeros(a.shape[0], b.shape[1])
        return Later(lambda: (a @ b, torch.relu(a @ b)), (zeros, zeros))
