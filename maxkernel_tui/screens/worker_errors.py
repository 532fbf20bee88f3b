"""The one handler of failed workers: the app and every screen that runs workers inherit it, so a
worker's exception (an unreachable Ray head, a store that cannot be written, a bug) is shown as
an error and told to its owner, and the app keeps running. Workers are started with
`exit_on_error=False`, else Textual would end the app first. No jax here."""

from __future__ import annotations

from textual.worker import Worker, WorkerState

from maxkernel_tui.visible import visible


class ShowsWorkerErrors:
    """Mix into an App or a Screen (before it in the bases): `Worker.StateChanged` does not
    bubble, so each owner of workers handles its own, here."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if event.state != WorkerState.ERROR or worker.error is None:
            return
        error = worker.error
        worker.node.app.notify(
            visible(f"{type(error).__name__}: {error}"),
            title=f"{worker.group or worker.name} failed",
            severity="error",
            timeout=15,
            markup=False,
        )
        self.worker_failed(worker.group, error)

    def worker_failed(self, group: str, error: BaseException) -> None:
        """What the owner does besides showing the error (what it showed as running is not)."""
