"""The evaluation harness: static, trace, TPU lowering and compile, numerics, timing.

`evaluate()` (harness.py) is the library call; candidate code only ever runs in a fresh worker
process of its own, the reference in another, and the comparison happens in the caller.
"""
