"""Control characters from untrusted text are shown as escapes (visible.py), on every stream
the CLI writes; the program's own status line still redraws in place."""

import io
import sys

from maxkernel_tui.visible import terminal, visible, visible_output
from tests.support.hostile_text import HOSTILE, live_controls


def test_every_control_character_is_shown_as_an_escape():
    shown = visible(HOSTILE)
    assert live_controls(shown) == []
    assert shown.startswith("\\x1b]52;c;cm0gLXJmIH4K\\x07\\x1b]0;owned\\x07\\x1b[2J\\x9b31m")
    assert "safe\\x0dfake\\x08" in shown and "\\u202eevil" in shown


def test_lines_and_tabs_stay_and_a_crlf_is_a_line_end():
    assert visible("a\tb\r\nc\nd") == "a\tb\nc\nd"
    assert visible("bad byte \udcff") == "bad byte \\udcff"  # a terminal's encoder would refuse it


def test_the_cli_streams_show_controls_but_the_programs_own_sequences_pass(monkeypatch):
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    with visible_output():
        print(HOSTILE)
        print(HOSTILE, file=sys.stderr)
        terminal(sys.stderr).write("\r\x1b[K")
    assert live_controls(out.getvalue()) == []
    assert err.getvalue().endswith("\r\x1b[K")
    assert live_controls(err.getvalue().removesuffix("\r\x1b[K")) == []
    assert sys.stdout is out and sys.stderr is err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_tasks_show_colours_a_hostile_reference_without_passing_its_controls(tmp_path, monkeypatch):
    """On a terminal the reference is highlighted (our colour sequences) and its own control
    characters are escapes; piped, it is plain text with the same escapes."""
    from maxkernel_tui.cli import main
    from tests.support.task_folders import write_plain

    folder = write_plain(tmp_path, "36k_Matmul_Sigmoid_Sum")
    reference = folder / "reference.py"
    reference.write_text(reference.read_text() + f'NOTE = """{HOSTILE}"""\n')
    for out in (_Terminal(), io.StringIO()):
        monkeypatch.setattr(sys, "stdout", out)
        assert main(["tasks", "show", str(folder)]) == 0
        shown = out.getvalue()
        assert "\x1b]52" not in shown and "\x07" not in shown and "\u202e" not in shown
        assert "\\x07" in shown and "\\u202e" in shown  # shown, as escapes
        assert ("\x1b[" in shown) == out.isatty()  # colours on a terminal only
