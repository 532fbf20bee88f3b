"""maxkernel-tui: a terminal workbench for JAX/Pallas TPU kernels, designed with LLM agents."""

__version__ = "0.1.0"
