"""The app's own commands in Textual's command palette (ctrl+p), beside Textual's system
commands."""

from __future__ import annotations

from collections.abc import Callable

from textual.command import DiscoveryHit, Hit, Hits, Provider

# (name, help, the app action it runs): actions, so that keys and palette do the same thing
COMMANDS = (
    (
        "Sessions",
        "List the sessions in the store: resume one or export its best kernel",
        "open_sessions",
    ),
    (
        "Settings",
        "Provider, model, TPU generation, budget and theme, saved to the config file",
        "open_settings",
    ),
    ("Help: keys of this screen", "Every key binding of the current screen", "help"),
)


class MaxKernelCommands(Provider):
    def _runner(self, action: str) -> Callable[[], object]:
        return lambda: self.app.run_action(action)

    async def discover(self) -> Hits:
        for name, help_text, action in COMMANDS:
            yield DiscoveryHit(name, self._runner(action), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, action in COMMANDS:
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), self._runner(action), help=help_text)
