"""Our themes are registered; the default draws with the terminal's ANSI colours only."""

from maxkernel_tui.app import MaxKernelApp
from maxkernel_tui.themes import DEFAULT_THEME, THEMES


async def test_our_themes_are_available_and_switchable(tmp_path):
    app = MaxKernelApp(tasks_dir=tmp_path, cache=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        assert app.theme == DEFAULT_THEME and app.current_theme.ansi
        for theme in THEMES:
            assert theme.name in app.available_themes
            app.theme = theme.name
            await pilot.pause()
            assert app.current_theme.name == theme.name
        assert "textual-dark" in app.available_themes  # Textual's own stay available
