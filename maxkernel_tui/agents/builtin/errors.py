"""What the built-in agent says when it has no plan: one exception, with a plain reason."""


class CannotPlan(Exception):
    """The built-in agent cannot plan a kernel for this computation; the message says why."""
