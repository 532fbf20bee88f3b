"""Settings: provider, model, TPU generation, budget, theme and the Ray cluster evaluations run
on (`[executor] ray`), written to the TOML config file.

Only the fields the user changed are written (a value that came from an environment variable is
not copied into the file), through config.save_settings, which validates first: on any invalid
field the errors show beside the fields and nothing is written."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Button, Footer, Header, Input, Label, Select, Static

from maxkernel_tui.config import (
    PROVIDERS,
    ConfigError,
    Settings,
    save_settings,
    validate_settings,
)
from maxkernel_tui.kernels.targets import TARGETS
from maxkernel_tui.screens.messages import SettingsSaved
from maxkernel_tui.themes import DEFAULT_THEME

# (setting, label): the order of the form
FIELDS = (
    ("provider", "Provider"),
    ("model", "Model"),
    ("tpu_target", "TPU generation"),
    ("budget_dollars", "Budget (USD per session)"),
    ("budget_tokens", "Budget (tokens per session)"),
    ("theme", "Theme"),
    ("ray", "Ray cluster (HOST:PORT or local)"),
)


class SettingsScreen(Screen[None]):
    CSS_PATH = "settings.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "Save", priority=True),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, settings: Settings, themes: list[str]) -> None:
        super().__init__()
        self._settings = settings
        self._themes = themes
        self._initial: dict[str, Any] = {}
        self._theme_before = ""

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="form"):
            for name, label in FIELDS:
                with Horizontal(classes="field"):
                    yield Label(label, classes="label")
                    yield self._editor(name)
                    yield Static(self._source_note(name), classes="source", markup=False)
                yield Static("", id=f"{name}-error", classes="error", markup=False)
            yield Static(f"settings file: {self._settings.config_file}", id="where", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Save (ctrl+s)", id="save", variant="primary")
                yield Button("Cancel (esc)", id="cancel")
        yield Footer()

    def _editor(self, name: str) -> Widget:
        value = getattr(self._settings, name)
        if name == "provider":
            return Select([(p, p) for p in PROVIDERS], value=value, allow_blank=False, id=name)
        if name == "tpu_target":
            targets = list(TARGETS) + (
                [value] if value not in TARGETS else []
            )  # keep a generation only libtpu knows
            return Select([(t, t) for t in targets], value=value, allow_blank=False, id=name)
        if name == "theme":
            current = value if value in self._themes else DEFAULT_THEME
            return Select([(t, t) for t in self._themes], value=current, allow_blank=False, id=name)
        placeholder = {
            "model": "the provider's default",
            "budget_dollars": "no cap, e.g. 5.00",
            "budget_tokens": "no cap, e.g. 2000000",
            "ray": "none: this machine's worker pool",
        }[name]
        return Input(
            "" if value is None else f"{value:g}" if isinstance(value, float) else str(value),
            placeholder=placeholder,
            id=name,
        )

    def _source_note(self, name: str) -> str:
        source = self._settings.source(name)
        if source.kind in ("env", "flag"):
            return f"from {source.where}: it wins over the file"
        return source.kind

    def on_mount(self) -> None:
        self.sub_title = "settings"
        self._initial = self._values()
        self._theme_before = self.app.theme
        self.query_one("#provider", Select).focus()

    def _values(self) -> dict[str, Any]:
        """The form's values; an empty text box means unset (None)."""
        values: dict[str, Any] = {}
        for name, _ in FIELDS:
            widget = self.query_one(f"#{name}")
            if isinstance(widget, Input):
                values[name] = widget.value.strip() or None
            elif isinstance(widget, Select):
                values[name] = widget.value
        return values

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "theme" and isinstance(event.value, str):
            self.app.theme = event.value  # a preview; escape puts the old one back

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "save":
            self.action_save()
        else:
            self.action_cancel()

    def action_save(self) -> None:
        values = self._values()
        changed = {
            name: value for name, value in values.items() if value != self._initial.get(name)
        }
        errors = validate_settings(changed)
        for name, _ in FIELDS:
            self.query_one(f"#{name}-error", Static).update(
                f"✗ {errors[name]}" if name in errors else ""
            )
        if errors:
            self.notify("nothing saved: fix the fields marked ✗", severity="error")
            return
        if not changed:
            self.notify("nothing changed")
            self.dismiss()
            return
        try:
            path = save_settings(changed, self._settings.config_file)
        except (ConfigError, OSError) as error:
            self.query_one("#where", Static).update(f"✗ not saved: {error}")
            return
        self.app.post_message(SettingsSaved(changed, path))  # to the app: this screen closes now
        self.dismiss()

    def action_cancel(self) -> None:
        self.app.theme = self._theme_before
        self.dismiss()
