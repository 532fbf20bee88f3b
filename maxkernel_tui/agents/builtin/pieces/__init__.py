"""The fixed pieces of the kernels the built-in agent writes, as real Python that jax runs and
tests call, and the one way their text is taken for a generated file.

Each family's kernel is one parameterised module: matmul.py, rowwise.py (row-wise stages and
column reductions), conv.py, attention.py, with the helpers of blocks.py and groups.py. A
generated file must stand alone (the harness loads a candidate with only jax and numpy
importable), so it never imports these modules: their functions are copied into it whole and
called with the task's parameters.

    function_source(_pick_block)     # a function copied whole, exactly as written here
    section_source(blocks, "vmem")   # module-level lines between `# piece: vmem` and `# end`

No text is substituted into a piece: what varies with the task is a parameter of its call, or
a module-level name the piece reads (the BLOCK_* tunables) that the generated file defines
itself. Imports nothing heavy; the piece modules import jax.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any


def function_source(function: Callable[..., Any]) -> str:
    """The function's definition, as written in its module."""
    return inspect.getsource(function)


def section_source(module: ModuleType, name: str) -> str:
    """The lines of `module` between `# piece: NAME` and the next `# end piece`."""
    lines = inspect.getsource(module).splitlines(keepends=True)
    start = lines.index(f"# piece: {name}\n") + 1
    return "".join(lines[start : lines.index("# end piece\n", start)])
