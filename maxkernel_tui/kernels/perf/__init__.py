"""Performance: static analysis of Pallas kernels, the TPU performance model, profiles."""
