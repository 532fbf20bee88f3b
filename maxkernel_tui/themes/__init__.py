"""Our themes, as data: a dark and a light one, and one that uses only the terminal's ANSI
palette for plain SSH terminals (the default). Textual's built-in themes stay available."""

from __future__ import annotations

from textual.theme import Theme

DEFAULT_THEME = "maxkernel-ansi"

THEMES = (
    Theme(
        name="maxkernel-dark",
        primary="#4fb3d9",
        secondary="#8f7ee7",
        accent="#f2a541",
        warning="#f2c14e",
        error="#e5534b",
        success="#57ab5a",
        foreground="#d7dde4",
        background="#14181d",
        surface="#1c2128",
        panel="#242b33",
        dark=True,
    ),
    Theme(
        name="maxkernel-light",
        primary="#1f6f9c",
        secondary="#6a4fc7",
        accent="#b86e00",
        warning="#9a6700",
        error="#c53030",
        success="#2f7d32",
        foreground="#1f2328",
        background="#fbfbfa",
        surface="#f1f3f5",
        panel="#e6e9ed",
        dark=False,
    ),
    Theme(
        name="maxkernel-ansi",
        primary="ansi_blue",
        secondary="ansi_magenta",
        accent="ansi_yellow",
        warning="ansi_yellow",
        error="ansi_red",
        success="ansi_green",
        foreground="ansi_default",
        background="ansi_default",
        surface="ansi_default",
        panel="ansi_default",
        boost="ansi_default",
        dark=True,
        ansi=True,
        # Textual's styles for ANSI themes read these; the values are palette names, never RGB.
        variables={
            "ansi-background": "ansi_black",
            "ansi-foreground": "ansi_white",
            "block-cursor-foreground": "ansi_black",
            "block-cursor-background": "ansi_white",
            "input-cursor-background": "ansi_black",
            "input-cursor-foreground": "ansi_bright_white",
            "input-selection-background": "ansi_bright_blue",
            "input-selection-foreground": "ansi_black",
            "screen-selection-background": "ansi_bright_blue",
            "screen-selection-foreground": "ansi_black",
            "border-blurred": "ansi_black",
        },
    ),
)
