"""The strategy library of the graph search: well-formed entries, lookups and family filters."""

from __future__ import annotations

import dataclasses
import re

import pytest

from maxkernel_tui.agents.strategies import (
    FAMILIES,
    STRATEGIES,
    Strategy,
    applicable,
    strategy,
)


def test_library_size_and_unique_names():
    names = [s.name for s in STRATEGIES]
    assert 25 <= len(names) <= 40
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", n) for n in names)
    assert len({s.title for s in STRATEGIES}) == len(STRATEGIES)


def test_instructions_are_short_paragraphs_that_say_something():
    for s in STRATEGIES:
        sentences = [p for p in re.split(r"(?<=[.!?])\s+", s.instruction) if p]
        assert 2 <= len(sentences) <= 5, (s.name, len(sentences))
        assert 150 <= len(s.instruction) <= 700, (s.name, len(s.instruction))
        assert "  " not in s.instruction and "\n" not in s.instruction, s.name
        assert s.title and len(s.title) <= 40, s.name


def test_families_are_known_ones():
    for s in STRATEGIES:
        assert isinstance(s.applies_to, frozenset)
        assert s.applies_to <= FAMILIES, (s.name, s.applies_to - FAMILIES)


def test_strategies_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        STRATEGIES[0].name = "other"  # type: ignore[misc]


def test_lookup_by_name_and_a_clear_error():
    assert strategy("causal-block-skip").applies_to == frozenset({"attention"})
    assert isinstance(strategy("grow-row-blocks"), Strategy)
    with pytest.raises(
        KeyError, match=r"unknown strategy 'warp-specialise'; known: grow-row-blocks"
    ):
        strategy("warp-specialise")


def test_applicable_filters_by_family():
    universal = [s for s in STRATEGIES if not s.applies_to]
    assert universal
    for family in FAMILIES:
        chosen = applicable(family)
        assert all(s in chosen for s in universal)
        assert all(not s.applies_to or family in s.applies_to for s in chosen)
        assert len(chosen) >= 10, family  # every family has a real choice of moves
    names = {s.name for s in applicable("attention")}
    assert {"causal-block-skip", "online-softmax", "scalar-prefetch-indices"} <= names
    assert "conv-as-shifted-matmuls" not in names
    assert "conv-as-shifted-matmuls" in {s.name for s in applicable("kb-conv")}
    assert applicable("no-such-family") == universal
    assert [s.name for s in applicable("norm")] == [s.name for s in STRATEGIES if s.applies("norm")]
