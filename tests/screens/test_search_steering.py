"""Steering from the search screen (fake tools: no jax, no workers): each key gives its action
(an idea, a strategy, an expansion, a pin, a kernel by hand, the score's TPU generation, a
comparison), the screen lists it as waiting, and when the search runs its next round the nodes
they ask for appear in the tree, each taken-up action saying so. A node's evidence card is one
key away, and its portability matrix one more."""

from __future__ import annotations

import pytest
from textual.app import App
from textual.widgets import Input, Markdown, Static, TextArea, Tree

from maxkernel_tui.agents.roles.tunables import set_tunables
from maxkernel_tui.agents.search.steering import given
from maxkernel_tui.agents.strategies import applicable
from maxkernel_tui.kernels.perf.vs_xla import VsXla, XlaBaseline, XlaFigure
from maxkernel_tui.kernels.report.basis import Basis
from maxkernel_tui.kernels.service.portability import PortabilityRow
from maxkernel_tui.screens.evidence_card import EvidenceCardScreen
from maxkernel_tui.screens.hand_edit import HandEditScreen
from maxkernel_tui.screens.search import SearchScreen
from maxkernel_tui.screens.search_compare import CompareScreen
from maxkernel_tui.services.search_feed import SearchFeed
from maxkernel_tui.store.db import Store
from maxkernel_tui.store.kinds import SteerAction
from tests.fakes.role_provider import RoleProvider
from tests.support.engine import GOOD, Bench, rmsnorm_task, variant
from tests.support.screens import screenshot, tree_labels
from tests.support.waiting import until

pytestmark = pytest.mark.asyncio

IDEA = "keep x in VMEM across both passes"

V6E = VsXla(XlaFigure(XlaBaseline.AS_WRITTEN, 1, 2.0, Basis.ESTIMATED, "v6e"))


def steering_text(screen: SearchScreen) -> str:
    return str(screen.query_one("#steering", Static).content)


async def select(pilot, screen: SearchScreen, ref: str) -> None:
    screen.query_one("#nodes", Tree).move_cursor(screen._tree_nodes[ref])
    await pilot.pause()


async def type_line(pilot, text: str) -> None:
    await pilot.press(*text)
    await pilot.press("enter")


async def test_every_steering_key_is_stored_listed_and_taken_up_at_the_next_round(
    tmp_path,
) -> None:
    store_path = tmp_path / "s.db"
    rows = [256, 512, 128, 64, 32, 1024, 2048, 8]
    with Store(store_path) as db:
        provider = RoleProvider({"implementer": [variant(r) for r in rows]})
        search = Bench(db, tmp_path / "sessions").search(
            provider, algorithm="parallel", width=1, depth=1
        )
        await search.run()  # the search has reached its depth: steering runs one more round
        feed = SearchFeed.following(search.base.journal, store_path)
        screen = SearchScreen(rmsnorm_task(), feed, control=search)
        strategy = applicable(screen.kernel_task.category)[-1].name
        hand = set_tunables(GOOD, {"BLOCK_ROWS": 4096})
        app: App[None] = App()
        async with app.run_test(size=(180, 50)) as pilot:
            await app.push_screen(screen)
            await until(pilot, lambda: len(tree_labels(screen)) == 2)
            await select(pilot, screen, "n0")
            await pilot.press("i")
            assert screen.query_one("#steer-input", Input).has_focus
            await type_line(pilot, IDEA)
            await pilot.press("g")
            await type_line(pilot, strategy)
            await pilot.press("n", "t")
            await until(pilot, lambda: tree_labels(screen)[0].endswith("⚑"))
            await pilot.press("T")
            await type_line(pilot, "v6e")
            await select(pilot, screen, "n1")
            await pilot.press("o")
            editor = await until(
                pilot, lambda: app.screen if isinstance(app.screen, HandEditScreen) else None
            )
            editor.query_one("#hand-source", TextArea).text = hand
            await pilot.press("ctrl+s")
            await until(pilot, lambda: app.screen is screen)
            await pilot.press("m")
            await select(pilot, screen, "n0")
            await pilot.press("m")
            compare = await until(
                pilot, lambda: app.screen if isinstance(app.screen, CompareScreen) else None
            )
            assert "BLOCK_ROWS = 256" in "\n".join(compare.query_one("#compare-diff").lines)
            await pilot.press("escape")

            actions = [s.action for s in given(db, search.base.session_id)]
            assert actions == [
                SteerAction.IDEA,
                SteerAction.STRATEGY,
                SteerAction.EXPAND,
                SteerAction.PIN,
                SteerAction.TARGET,
                SteerAction.HAND_CHILD,
                SteerAction.COMPARE,
            ]
            await until(pilot, lambda: "waiting for the next round" in steering_text(screen))
            assert f'idea at #0: "{IDEA}": waiting' in steering_text(screen)

            await search.run()  # the search's next round takes them up
            await until(pilot, lambda: len(tree_labels(screen)) == 6)
            labels = tree_labels(screen)
            assert any(" idea ← #0" in label for label in labels)
            assert any(f" {strategy} ← #0" in label for label in labels)
            await until(
                pilot,
                lambda: any(x.startswith("#5 ✓ 16× by hand ← #1") for x in tree_labels(screen)),
            )
            await until(pilot, lambda: "its node in round 2" in steering_text(screen))
            assert "score on TPU v6e: taken up" in steering_text(screen)
            screenshot(app, "search_steered.svg")


async def test_a_nodes_evidence_card_shows_its_checks_cost_and_portability(tmp_path) -> None:
    store_path = tmp_path / "s.db"
    asked: list[str] = []

    async def matrix(source: str) -> list[PortabilityRow]:
        asked.append(source)
        return [
            PortabilityRow("v5e", False, "scoped vmem limit exceeded: 40.0M of 16.0M", 40 << 20),
            PortabilityRow("v6e", True, "", 40 << 20, 128 << 20, 1e-3, 2e-3, V6E),
        ]

    with Store(store_path) as db:
        provider = RoleProvider({"implementer": [variant(r) for r in (256, 512)]})
        search = Bench(db, tmp_path / "sessions").search(
            provider, algorithm="parallel", width=1, depth=1
        )
        await search.run()
        feed = SearchFeed.following(search.base.journal, store_path)
        screen = SearchScreen(rmsnorm_task(), feed, control=search, portability=matrix)
        app: App[None] = App()
        async with app.run_test(size=(160, 50)) as pilot:
            await app.push_screen(screen)
            await until(pilot, lambda: len(tree_labels(screen)) == 2)
            await select(pilot, screen, "n1")
            await pilot.press("c")
            card = await until(
                pilot, lambda: app.screen if isinstance(app.screen, EvidenceCardScreen) else None
            )
            text = card.query_one("#card", Markdown).source
            assert "search node #1" in text and "verdict: ACCEPTED" in text
            assert "✓ numerics" in text and "node #1's steps: 1 evaluations" in text
            assert "not computed yet" in text
            await pilot.press("p")
            await until(pilot, lambda: "| v5e | ✗ no" in card.query_one("#card", Markdown).source)
            text = card.query_one("#card", Markdown).source
            assert "scoped vmem limit exceeded" in text and "| v6e | ✓ yes |" in text
            assert "2.00x XLA@1-pass (as written) · vs XLA@tolerance: not known" in text
            assert asked == [search.graph["n1"].source]
            screenshot(app, "evidence_card_node.svg")
