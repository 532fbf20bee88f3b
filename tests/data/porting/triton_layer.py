"""A row-wise softmax in Triton, run by the PyTorch module of its harness (so the module's
forward is the Triton kernel: the offline translator cannot read it, the porter can)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(in_ptr + row * n_cols + offsets, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * n_cols + offsets, e / tl.sum(e, axis=0), mask=mask)


def triton_softmax(x):
    out = torch.empty_like(x)
    grid = (x.shape[0],)
    softmax_kernel[grid](out, x, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


class Model(nn.Module):
    def forward(self, x):
        return triton_softmax(x)


batch_size = 512
dim = 256


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
