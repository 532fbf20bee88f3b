"""Paths to the test data that several test modules read."""

import pathlib

TESTS = pathlib.Path(__file__).resolve().parent.parent
ADAPTED_TASKS = TESTS / "data" / "adapted_tasks"  # task folders in the JaxBench adapted format
KERNELS = TESTS / "data" / "kernels"  # honest/ and cheats/ candidate kernels, agent/ fixtures
KERNELBENCH = TESTS / "data" / "kernelbench"  # PyTorch modules in KernelBench's format
GRADIENT_TASKS = TESTS / "data" / "gradient_tasks"  # training tasks: ours and a plain folder
ISSUE40_TASKS = TESTS / "data" / "issue40"  # our own folders per family, in the field's styles
# issue 40's convolution folders: MaxKernel's adapted style (sizes in dicts) and a third style
ISSUE40_CONV2D = ISSUE40_TASKS / "conv2d"
BENCHMARKS = TESTS.parent / "benchmarks"
