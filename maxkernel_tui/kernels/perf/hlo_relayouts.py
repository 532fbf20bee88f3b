"""The copies in XLA's optimised program that lay an array out anew (a transpose XLA makes a
copy into another layout, with a cast fused into it), read from the compiled HLO text: the
bytes they read and write. No jax.

XLA's cost analysis counts these bytes with the rest of the program's, as if they moved at the
HBM's pace; on a TPU they do not (xla_model.relayout_seconds). A copy that keeps its layout (an
asynchronous prefetch into VMEM, `copy-start`) is not one; only the entry computation's copies
count (a fusion's body is not an HBM pass of its own)."""

from __future__ import annotations

import math
import re

# `%name = bf16[128,64,128,128]{0,1,3,2:T(8,128)(2,1)} opcode(...`: a value's type and layout
_DEFINITION = re.compile(
    r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(\w+)\[([\d,]*)\]\{([^}]*)\}\s+([\w\-]+)\((.*)$"
)
# a copy's operand, printed with its type (`copy(f32[8,128]{1,0} %x)`) or by name (`copy(%x)`)
_OPERAND = re.compile(r"^\s*(?:(\w+)\[([\d,]*)\]\{([^}]*)\}\s*)?%?([\w.\-]+)")
_BITS = re.compile(r"(\d+)")


def relayout_bytes(hlo: str) -> tuple[int, int]:
    """(bytes read, bytes written) by the entry computation's copies that change the order of
    their array's dimensions in memory."""
    values: dict[str, tuple[str, str, str]] = {}
    read = written = 0
    for line in _entry(hlo).splitlines():
        found = _DEFINITION.match(line)
        if found is None:
            continue
        name, element_type, shape, layout, opcode, rest = found.groups()
        values[name] = (element_type, shape, layout)
        operand = _OPERAND.match(rest) if opcode == "copy" else None
        if operand is None:
            continue
        typed = operand.group(1) is not None
        source = operand.groups()[:3] if typed else values.get(operand.group(4))
        if source is None or _order(source[2]) == _order(layout):
            continue
        written += _nbytes(element_type, shape)
        read += _nbytes(source[0], source[1])
    return read, written


def _entry(hlo: str) -> str:
    """The text of the ENTRY computation (the whole text when there is no such line)."""
    start = re.search(r"^ENTRY\b.*$", hlo, re.MULTILINE)
    if start is None:
        return hlo
    end = re.search(r"^\}", hlo[start.end() :], re.MULTILINE)
    return hlo[start.start() : start.end() + (end.start() if end else len(hlo))]


def _order(layout: str) -> str:
    """The minor-to-major order of a layout, without its tiling: "0,1,3,2:T(8,128)" -> "0,1,3,2"."""
    return layout.split(":", 1)[0].strip()


def _nbytes(element_type: str, shape: str) -> int:
    if element_type == "pred":
        size = 1
    else:
        bits = _BITS.search(element_type)
        size = max(int(bits.group(1)) // 8, 1) if bits else 4
    return math.prod(int(d) for d in shape.split(",") if d) * size
