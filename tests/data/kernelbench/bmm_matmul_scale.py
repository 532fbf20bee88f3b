import torch
import torch.nn as nn


class Model(nn.Module):
    """Batched matmul, a second product with @, scaling and a sum over the last dim."""

    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, A, B, C):
        x = torch.bmm(A, B)
        y = torch.matmul(x, C) * self.scale
        z = x @ C
        return torch.sum(y + z, dim=-1)


batch = 8
m = 128
k = 256
n = 64
p = 32
scale = 0.5


def get_inputs():
    A = torch.rand(batch, m, k)
    B = torch.rand(batch, k, n)
    C = torch.randn(n, p)
    return [A, B, C]


def get_init_inputs():
    return [scale]
