"""A worker's answers to its parent: one JSON line each, on a descriptor of their own. No jax.

Workers run code we did not write (a candidate, a task's reference, a model's snippet), and
that code may print: a debugging `print`, `pl.debug_print` in interpret mode, bytes written
straight to descriptor 1. Had the answers shared standard output with it, one stray line would
break the protocol and turn an honest kernel into "the worker crashed". So the first answer
moves the protocol to a copy of descriptor 1 and points descriptor 1 (and `sys.stdout`) at
standard error, where whatever else is written lands in the worker's log.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO


class _Protocol:
    stream: TextIO | None = None


def reply(message: Any) -> None:
    """Send `message` (JSON-serialisable) to the parent as one line."""
    if _Protocol.stream is None:
        _Protocol.stream = _claim_stdout()
    _Protocol.stream.write(json.dumps(message) + "\n")
    _Protocol.stream.flush()


def _claim_stdout() -> TextIO:
    sys.stdout.flush()
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return protocol
