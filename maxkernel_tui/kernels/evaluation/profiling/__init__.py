"""The profile of a kernel: its programs traced in the sandbox, read with the performance model
(kernels/perf) and, on a TPU, with the profiler (profile.py on the host, worker.py in the
sandboxed worker)."""
