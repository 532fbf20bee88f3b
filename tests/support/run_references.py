"""Runs reference files in this process, which imports jax: `python -m
tests.support.run_references DIR`, for each `DIR/*.py`, saves its inputs and its output as
`DIR/<stem>.npz` (`input0`, `input1`, ..., `output`).

`get_inputs` and `computation` are each jitted, and keys use the `unsafe_rbg` generator: eager
threefry draws compile per shape and took over 40 s for one module on a loaded 2-core machine;
the values only need to be the same on both sides of the comparison."""

import pathlib
import sys

import jax
import numpy as np


def main() -> None:
    jax.config.update("jax_default_prng_impl", "unsafe_rbg")
    folder = pathlib.Path(sys.argv[1])
    for path in sorted(folder.glob("*.py")):
        namespace: dict = {"__name__": path.stem}
        exec(compile(path.read_text(), str(path), "exec"), namespace)
        dynamic, static = jax.jit(namespace["get_inputs"])()
        output = jax.jit(namespace["computation"])(*dynamic, *static)
        arrays = {f"input{i}": np.asarray(a) for i, a in enumerate(dynamic)}
        np.savez(folder / f"{path.stem}.npz", output=np.asarray(output), **arrays)


if __name__ == "__main__":
    main()
