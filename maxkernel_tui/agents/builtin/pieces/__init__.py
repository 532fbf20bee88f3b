"""The fixed pieces of the kernels the built-in agent writes, as real Python that jax runs and
tests call, and the one way their text is taken for a generated file.

A generated file must stand alone (the harness loads a candidate with only jax and numpy
importable), so it never imports these modules: their source is copied into it.

    function_source(_pick_block)     # a helper copied whole, exactly as written here
    body_lines(_online_softmax_step) # the statements of a piece, without its signature,
                                     # docstring and final `return`, to splice into a kernel
    section_source(blocks, "vmem")   # module-level lines between `# piece: vmem` and `# end`

No parameters are substituted into piece text: what varies with the task (a ref's name, a
constant the reference uses) is a module-level name in the piece (`MASK_VALUE`) that the
generated file defines itself. Imports nothing heavy; the piece modules import jax.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from types import ModuleType
from typing import Any


def function_source(function: Callable[..., Any]) -> str:
    """The function's definition, as written in its module."""
    return inspect.getsource(function)


def body_lines(function: Callable[..., Any], indent: int) -> list[str]:
    """The function's statements at `indent` spaces: its docstring and a final `return` (there
    so tests can call the piece) left out, comments between the statements kept."""
    source = textwrap.dedent(inspect.getsource(function))
    definition = ast.parse(source).body[0]
    assert isinstance(definition, ast.FunctionDef)
    statements = definition.body
    if ast.get_docstring(definition) is not None:
        statements = statements[1:]
    if isinstance(statements[-1], ast.Return):
        statements = statements[:-1]
    lines = source.splitlines()[statements[0].lineno - 1 : statements[-1].end_lineno]
    body = textwrap.dedent("\n".join(lines)).splitlines()
    return [(" " * indent + line) if line else line for line in body]


def section_source(module: ModuleType, name: str) -> str:
    """The lines of `module` between `# piece: NAME` and the next `# end piece`."""
    lines = inspect.getsource(module).splitlines(keepends=True)
    start = lines.index(f"# piece: {name}\n") + 1
    return "".join(lines[start : lines.index("# end piece\n", start)])
