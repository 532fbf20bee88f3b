"""What can go wrong with an executor other than this machine's worker pool, as exceptions the
commands and the search handle without importing Ray. Stdlib only."""


class ClusterError(ValueError):
    """The cluster cannot be used (unreachable, without token authentication, no node able to
    start the service, Ray not installed); the message says why and what to do."""


class EvaluationLost(RuntimeError):
    """An evaluation that no node could finish (every node it was sent to was lost)."""
