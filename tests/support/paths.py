"""Paths to the test data that several test modules read."""

import pathlib

TESTS = pathlib.Path(__file__).resolve().parent.parent
ADAPTED_TASKS = TESTS / "data" / "adapted_tasks"  # task folders in the JaxBench adapted format
KERNELS = TESTS / "data" / "kernels"  # honest/ and cheats/ candidate kernels, agent/ fixtures
KERNELBENCH = TESTS / "data" / "kernelbench"  # PyTorch modules in KernelBench's format
GRADIENT_TASKS = TESTS / "data" / "gradient_tasks"  # training tasks: ours and a plain folder
ISSUE40_TASKS = TESTS / "data" / "issue40"  # our own folders per family, in the field's styles
