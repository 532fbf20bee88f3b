"""The static rule against kernels that observe where they run. No jax; nothing runs here.

A kernel that asks for its backend, its devices or their kind can be exact on the CPU, where
the numerics run, and do something else on a TPU. The rule is fast feedback for agents; on a
TPU the device numerics at production shapes stay the final judge (a candidate can reach the
same facts in ways no list of names foresees).
"""

from __future__ import annotations

import ast

# Names through which a program learns its platform: jax's backend and device queries, an
# array's device or sharding (whose text names the platform), a device's description, Pallas'
# TPU generation queries, and lax.platform_dependent (a branch per platform).
PLATFORM_QUERIES = frozenset(
    {
        "default_backend",
        "devices",
        "local_devices",
        "device_count",
        "local_device_count",
        "backends",
        "get_backend",
        "backend",
        "xla_bridge",
        "platform",
        "platform_version",
        "platform_dependent",
        "device_kind",
        "device",
        "sharding",
        "addressable_shards",
        "device_set",
        "addressable_devices",
        "get_tpu_info",
        "tpu_info",
        "chip_version",
        "TpuInfo",
        "ChipVersion",
    }
)


def platform_problem(node: ast.AST) -> str | None:
    """A sentence naming the line where `node` observes the platform; None when it does not."""
    line = getattr(node, "lineno", "?")
    name: str | None = None
    if isinstance(node, ast.Attribute) and node.attr in PLATFORM_QUERIES:
        name = f".{node.attr}"
    elif isinstance(node, ast.ImportFrom):
        found = [a.name for a in node.names if a.name in PLATFORM_QUERIES]
        name = f"import {found[0]}" if found else None
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "hasattr")
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value in PLATFORM_QUERIES
    ):
        name = f"{node.func.id}(..., {node.args[1].value!r})"
    if name is None:
        return None
    return (
        f"observes the platform it runs on (`{name}` at line {line}): a kernel must compute "
        "the same thing on every backend, where the numerics run and where it is timed"
    )
