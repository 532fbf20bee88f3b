"""Cheat category: memory exhaustion.

computation keeps allocating (and touching) 1 GiB numpy buffers, up to 256 GiB in all.
Allocating in chunks sidesteps the kernel's refusal of one absurd request, so the process
really grows until a memory limit stops it.

Expected: rejected by memory
"""
import numpy as np


def computation(x, scale, epsilon):
    hoard = [np.ones(1 << 30, np.uint8) for _ in range(256)]
    return hoard
