"""The OS sandbox of every worker that runs code we did not write (DESIGN.md §4): namespaces,
Landlock, seccomp and resource limits, entered by the worker itself after its fork and before
the code it was started for. No jax here."""
