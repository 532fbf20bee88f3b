"""The names of a task's configurations, below everything that reads a task. No jax here.

Our own tasks declare `check`, `heldout` and `bench`. External tasks in the plain adapted format
only have production shapes, named `bench` (or `bench.0`, `bench.1`, ... for a list of inputs).
"""

BENCH = "bench"
CHECK = "check"
HELDOUT = "heldout"
