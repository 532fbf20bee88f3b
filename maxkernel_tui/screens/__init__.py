"""Textual screens; each screen's .tcss lives beside its .py."""
