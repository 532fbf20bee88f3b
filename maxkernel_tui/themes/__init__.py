"""Textual themes."""
