import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, then GroupNorm over the features."""

    def __init__(self, in_features, out_features, num_groups):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)

    def forward(self, x):
        x = self.linear(x)
        x = self.group_norm(x)
        return x


batch_size = 256
in_features = 512
out_features = 1024
num_groups = 8


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups]
