import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Adaptive average pooling, max/min/sum reductions, avg pooling, clamp, scalar arithmetic."""

    def __init__(self, scaling_factor):
        super(Model, self).__init__()
        self.pool = nn.AdaptiveAvgPool2d((4, 4))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        a = F.avg_pool2d(x, kernel_size=2, stride=2)
        a = self.pool(a)
        b = torch.max(a, dim=1)[0]
        c = torch.min(a, dim=1, keepdim=False).values
        d = a.sum(dim=1) - 2.0 * b + c
        d = d.clamp(min=-1.0)
        e = F.relu6(d) * self.scaling_factor + 1
        f = torch.amax(e, dim=-1) - e.mean(dim=-1)
        return f.view(f.size(0), -1)


batch_size = 32
channels = 16
height = width = 64
scaling_factor = 1.5


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [scaling_factor]
