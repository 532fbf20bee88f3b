"""Telling source kinds apart for porting, statically: CUDA and Triton kernels (for the porter
agent) and a PyTorch harness inside such a file (for the comparison that gates its answer).
No jax, no torch.
"""

from __future__ import annotations

import ast
import re
from enum import StrEnum
from pathlib import Path

from maxkernel_tui.kernels.porting.module_parse import is_module_file


class SourceKind(StrEnum):
    """The language of a kernel the porter translates."""

    CUDA = "cuda"
    TRITON = "triton"


CUDA_SUFFIXES = (".cu", ".cuh")
_CUDA_MARKERS = re.compile(r"__global__|load_inline\(|cuda_sources\s*=")
_TRITON_MARKERS = re.compile(r"^\s*@triton\.jit|^\s*import triton|^\s*from triton", re.MULTILINE)


def kernel_source_kind(path: Path, source: str) -> SourceKind | None:
    """CUDA for a .cu file or Python carrying CUDA (`load_inline`), TRITON for a Triton
    kernel file, else None."""
    if path.suffix in CUDA_SUFFIXES:
        return SourceKind.CUDA
    if _TRITON_MARKERS.search(source):
        return SourceKind.TRITON
    if _CUDA_MARKERS.search(source):
        return SourceKind.CUDA
    return None


def has_pytorch_harness(path: Path, source: str) -> bool:
    """A Python file holding a PyTorch `class Model(nn.Module)` and `get_inputs()` beside the
    kernel: the reference the porter's answer is compared with."""
    if path.suffix != ".py":
        return False
    try:
        return is_module_file(ast.parse(source))
    except SyntaxError:
        return False


def harness_sizes(source: str) -> dict[str, int]:
    """The module-level integer constants of a harness (the sizes both sides are run at)."""
    sizes: dict[str, int] = {}
    for node in ast.parse(source).body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and type(node.value.value) is int
        ):
            sizes[node.targets[0].id] = node.value.value
    return sizes
