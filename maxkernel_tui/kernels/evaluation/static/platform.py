"""The static rule against a program that branches on the platform it runs on. No jax.

`lax.platform_dependent` puts a branch per platform into the traced program: interpret mode on
the CPU, where the numerics run, takes one branch and the TPU, where the kernel is timed, takes
another, so no check on the CPU would judge what the TPU runs. The judge refuses such a program
(its `platform_index`, program_pickle.REFUSED); this rule names the line early.

Asking the platform in Python (`jax.devices()`, `jax.default_backend()`, an array's `.sharding`
or `.device`, `pltpu.get_tpu_info()`) is not refused: the kernel's Python runs only in the
tracer, where jax sees the CPU alone, and the one program it traces is what is checked in
interpret mode, compiled for the TPU and timed there. jax's own kernels read shardings
(`jax.sharding.PartitionSpec`, a `NamedSharding` argument) and TPU facts to choose tiles.
"""

from __future__ import annotations

import ast

PLATFORM_BRANCH = "platform_dependent"


def platform_problem(node: ast.AST) -> str | None:
    """A sentence naming the line where `node` branches on the platform; None when it does not."""
    name: str | None = None
    if isinstance(node, ast.Attribute) and node.attr == PLATFORM_BRANCH:
        name = f".{node.attr}"
    elif isinstance(node, ast.ImportFrom) and any(a.name == PLATFORM_BRANCH for a in node.names):
        name = f"import {PLATFORM_BRANCH}"
    if name is None:
        return None
    line = getattr(node, "lineno", "?")
    return (
        f"branches on the platform it runs on (`{name}` at line {line}): interpret mode on the "
        "CPU would not judge what the TPU runs"
    )
