"""A check's status and a report's verdict: the leaf that checks.py and reasons.py both read
(reasons.py cannot import checks.py, which imports it). Plain data; no jax."""

from __future__ import annotations

from enum import StrEnum


class CheckStatus(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"  # not run, and says why (e.g. timing without a TPU)


class Verdict(StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
