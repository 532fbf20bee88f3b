"""Static rules judge what the entry point can reach: JAXBench's expert files carry an unused
timing helper and a `__main__` block and pass; a host callback reached from `workload` is
refused."""

import textwrap

from maxkernel_tui.kernels.evaluation.static.checks import static_problems
from tests.support.task_folders import JAXBENCH_EXPERT

JAXBENCH_ENTRIES = ("workload", "computation")


def test_a_jaxbench_expert_with_an_unused_benchmark_helper_passes():
    assert static_problems(textwrap.dedent(JAXBENCH_EXPERT), "optimized.py", JAXBENCH_ENTRIES) == []


def test_a_callback_reached_from_workload_is_still_refused():
    source = textwrap.dedent(JAXBENCH_EXPERT).replace(
        "    bm, bn = TUNED_PARAMS", "    _on_host(x)\n    bm, bn = TUNED_PARAMS"
    )
    source += "\n\ndef _on_host(x):\n    return jax.pure_callback(print, x, x)\n"
    unreached = source.replace("    _on_host(x)\n", "")
    problems = static_problems(source, "optimized.py", JAXBENCH_ENTRIES)
    assert any("calls back into Python from device code" in p for p in problems), problems
    assert static_problems(unreached, "optimized.py", JAXBENCH_ENTRIES) == []


def test_any_name_reference_counts_as_reaching_a_definition():
    source = textwrap.dedent(
        """
        import jax

        def _sneaky(x):
            return jax.pure_callback(print, x, x)

        HELPERS = [_sneaky]

        def computation(x):
            return x + len(HELPERS)
        """
    )
    assert any("calls back into Python" in p for p in static_problems(source))


def test_module_level_code_is_always_judged():
    source = (
        "import jax\nfrom jax.lax import platform_dependent\n\ndef computation(x):\n    return x\n"
    )
    assert any("branches on the platform" in p for p in static_problems(source))


def test_a_jaxbench_candidate_may_define_workload_but_ours_must_define_computation():
    source = "import jax\n\ndef workload(x):\n    return x\n"
    assert static_problems(source, "k.py", JAXBENCH_ENTRIES) == []
    assert static_problems(source) == ["does not define a top-level `computation`"]
