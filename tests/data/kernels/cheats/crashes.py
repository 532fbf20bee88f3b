"""Cheat category: interpreter crash.

computation builds a numpy view whose stride points terabytes past a one-element buffer
(numpy.lib.stride_tricks.as_strided) and reads it, so the process dies with SIGSEGV instead of
raising a Python exception the harness could catch.

Expected: rejected by crash
"""
import numpy as np


def computation(x, scale, epsilon):
    anchor = np.zeros(1, np.uint8)
    wild = np.lib.stride_tricks.as_strided(anchor, shape=(2,), strides=(1 << 44,))
    return int(wild.sum())
