"""The evidence card as data: its Markdown says what was checked and where, what was measured and
what estimated, the portability matrix with the compiler's own reason cut to the sentence that
says why, and what it cost; its JSON reads back as the same card. No jax, no workers."""

from __future__ import annotations

from maxkernel_tui.kernels.perf.vs_xla import VsXla, XlaBaseline, XlaFigure
from maxkernel_tui.kernels.report.basis import Basis
from maxkernel_tui.kernels.service.portability import PortabilityRow
from maxkernel_tui.services.evidence import (
    CardSubject,
    EvidenceCard,
    compiler_words,
    report_card,
)
from tests.support.engine import accepted, summary

V5E_REFUSAL = (
    "TPU v5e compile failed: JaxRuntimeError: RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom:"
    " | Ran out of memory in memory space vmem while allocating on stack for %_lambda_.1 = "
    "bf16[8192,28672] custom-call(...). Scoped allocation with size 28.00M and limit 16.00M "
    "exceeded scoped vmem limit by 12.00M. It should not be possible to run out of scoped vmem"
)

V5E = VsXla(
    XlaFigure(XlaBaseline.AS_WRITTEN, 1, 1.02, Basis.ESTIMATED, "v5e"),
    XlaFigure(XlaBaseline.TOLERANCE, 3, 3.06, Basis.ESTIMATED, "v5e"),
)
V6E = VsXla(XlaFigure(XlaBaseline.AS_WRITTEN, 1, 0.97, Basis.ESTIMATED, "v6e"))


def test_the_card_of_an_accepted_kernel_with_its_matrix() -> None:
    card = report_card(
        CardSubject.NODE,
        "search node #3 (whole-k)",
        "8p_GEMM",
        accepted(),
        summary(1.4),
        tokens=1234,
        cost_usd=0.0123,
        cost_of="node #3's steps",
    ).with_portability(
        [
            PortabilityRow("v5e", False, V5E_REFUSAL, 28 << 20, 128 << 20, 0.02, 0.0205, V5E),
            PortabilityRow("v6e", True, "", 28 << 20, 128 << 20, 4.6e-3, 4.5e-3, V6E, 4.6e-3, 1.0),
        ]
    )
    text = card.to_markdown()
    assert text.startswith("## Evidence card: search node #3 (whole-k)\n")
    assert "**verdict: ACCEPTED, checked at small shapes only**" in text
    assert "✓ numerics" in text
    assert (
        "against XLA on TPU v5e: 1.40x XLA@1-pass (as written) (est., v5e) · "
        "vs XLA@tolerance: not known (estimated by the performance model"
    ) in text
    assert (
        "| v5e | ✗ no (below) | 28.0/128 MiB | 20.000 ms | "
        "3.06x XLA@3-pass (tolerance) · 1.02x XLA@1-pass (as written) | ? |"
    ) in text
    assert (
        "| v6e | ✓ yes | 28.0/128 MiB | 4.600 ms | "
        "0.97x XLA@1-pass (as written) · vs XLA@tolerance: not known | 1.00x |"
    ) in text
    assert (
        "- **v5e**: TPU v5e compile failed: JaxRuntimeError: RESOURCE\\_EXHAUSTED: E1001: "
        "CompileTimeScopedVmemOom: … Scoped allocation with size 28.00M and limit 16.00M exceeded "
        "scoped vmem limit by 12.00M\n"
    ) in text
    assert "nothing measured: no TPU timed this kernel" in text
    assert "1,234 tokens · $0.0123 (node #3's steps)" in text
    assert EvidenceCard.from_json(card.to_json()) == card
    assert card.to_json()["portability"][0]["reason"] == V5E_REFUSAL  # all of it, in the JSON


def test_a_card_not_judged_yet_says_so_and_that_its_matrix_waits() -> None:
    text = report_card(
        CardSubject.PROPOSAL, "implementer's proposal", "12p", None, None
    ).to_markdown()
    assert "**not judged yet**" in text and "no checks ran" in text
    assert "not computed yet (v4, v5e, v5p, v6e, tpu7x" in text


def test_the_compilers_words_keep_the_sentence_that_says_why() -> None:
    assert compiler_words("short reason") == "short reason"
    long = "error: " + "x" * 500
    assert len(compiler_words(long)) == 300 and compiler_words(long).endswith("…")
