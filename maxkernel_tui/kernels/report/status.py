"""A check's status and a report's verdict: the leaf that checks.py and reasons.py both read
(reasons.py cannot import checks.py, which imports it). Plain data; no jax."""

from __future__ import annotations

from enum import StrEnum


class CheckStatus(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"  # not run, and says why (e.g. timing without a TPU)


class CheckName(StrEnum):
    """The checks of an evaluation, in the order they run."""

    STATIC = "static"
    SANDBOX = "sandbox"  # the sandbox layers the candidate's process entered
    TRACE = "trace"
    TPU_LOWER = "tpu_lower"
    TPU_COMPILE = "tpu_compile"
    PRODUCTION = "production"  # the defences earned at production shapes
    NUMERICS = "numerics"  # numerics on the task's configurations other than held-out
    HELDOUT = "heldout"
    EDGE = "edge"  # numerics on the tester's validated edge-case configurations
    TILES = "tiles"  # sampled output tiles of the production grid (evaluation/tiles/verdict.py)
    TIMING = "timing"
    EXPERT = "expert"  # beside the task's expert baseline
    TASK = "task"  # the task changed during the evaluation


class Verdict(StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
