"""Graph search over candidate kernels: each node is one expansion (a strategy applied to a parent
kernel by the implementer, judged by the harness), persisted as it changes and resumable."""
