"""Saving a program's outputs as .npy files that NumPy alone can read. Imports jax."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import numpy as np


def save_outputs(out_dir: Path, stem: str, output: Any) -> list[str]:
    """Each output leaf as `<stem>-<i>.npy`; bf16 and f16 become f32 (exactly)."""
    files = []
    for index, leaf in enumerate(jax.tree.leaves(output)):
        array = np.asarray(leaf)
        if str(array.dtype) in ("bfloat16", "float16") or array.dtype.kind == "V":
            array = np.asarray(leaf, np.float32)
        path = out_dir / f"{stem}-{index}.npy"
        np.save(path, array, allow_pickle=False)
        files.append(str(path))
    return files
