import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Conv1d with stride, InstanceNorm1d (affine), Mish, Softplus, ELU."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super(Model, self).__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, stride=2)
        self.norm = nn.InstanceNorm1d(out_channels, affine=True)

    def forward(self, x):
        x = self.conv(x)
        x = self.norm(x)
        x = F.mish(x)
        x = F.softplus(x, beta=2.0)
        x = F.elu(x, alpha=0.5)
        return x


batch_size = 64
in_channels = 32
out_channels = 64
length = 1024
kernel_size = 5


def get_inputs():
    return [torch.rand(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
