# task: gpu_wide_product
# expect: mismatch
# gpu
# Computes nothing: frees a block of the output's size and returns a tensor laid over it (through
# __cuda_array_interface__, which shares memory and owns none), where the caching allocator puts the next tensor of
# that size: the reference's output, when the grader runs the reference before it reads the solution's. The grader
# copies the outputs when the call returns, before it allocates anything: the copy holds the zeros left here.
import torch
import torch.nn as nn


class FreedBlock:
    def __init__(self, pointer: int, shape: tuple):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f4", "data": (pointer, False), "version": 3}


class ModelNew(nn.Module):
    def forward(self, a, b):
        shape = (a.shape[0], b.shape[1])
        block = torch.zeros(shape, device=a.device)
        pointer = block.data_ptr()
        del block   # back to the caching allocator, still mapped
        return torch.as_tensor(FreedBlock(pointer, shape), device=a.device)
