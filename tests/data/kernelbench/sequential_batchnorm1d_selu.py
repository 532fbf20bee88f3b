import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.Sequential of Linear, BatchNorm1d, SELU, Dropout, Linear, then ELU and Sigmoid."""

    def __init__(self, in_features, hidden, out_features):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden),
            nn.BatchNorm1d(hidden),
            nn.SELU(),
            nn.Dropout(0.0),
            nn.Linear(hidden, out_features, bias=False),
        )
        self.elu = nn.ELU()

    def forward(self, x):
        x = self.net(x)
        x = torch.sigmoid(self.elu(x))
        return x


batch_size = 256
in_features = 128
hidden = in_features * 2
out_features = 64


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, hidden, out_features]
