"""Cheat category: hang.

computation spins in an infinite Python loop, so tracing never returns; only a wall-clock limit
on the candidate's process stops it.

Expected: rejected by timeout
"""


def computation(x, scale, epsilon):
    spins = 0
    while spins >= 0:
        spins += 1
