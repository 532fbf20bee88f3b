"""Static rules judge what the entry point can reach: JAXBench's expert files carry an unused
timing helper and a `__main__` block and pass; a clock reached from `workload` is refused."""

import textwrap

from maxkernel_tui.kernels.evaluation.static_checks import static_problems
from tests.support.task_folders import JAXBENCH_EXPERT

JAXBENCH_ENTRIES = ("workload", "computation")


def test_a_jaxbench_expert_with_an_unused_benchmark_helper_passes():
    assert static_problems(textwrap.dedent(JAXBENCH_EXPERT), "optimized.py", JAXBENCH_ENTRIES) == []


def test_a_clock_reached_from_workload_is_still_refused():
    source = textwrap.dedent(JAXBENCH_EXPERT).replace(
        "    bm, bn = TUNED_PARAMS", "    benchmark()\n    bm, bn = TUNED_PARAMS"
    )
    problems = static_problems(source, "optimized.py", JAXBENCH_ENTRIES)
    assert any("touches clocks (`import time`" in p for p in problems), problems


def test_any_name_reference_counts_as_reaching_a_definition():
    source = textwrap.dedent(
        """
        import jax

        def _sneaky():
            import os
            return os.environ

        HELPERS = [_sneaky]

        def computation(x):
            return x + len(HELPERS)
        """
    )
    assert any("reaches the environment" in p for p in static_problems(source))


def test_module_level_code_is_always_judged():
    source = "import jax\nimport time\n\ndef computation(x):\n    return x\n"
    assert any("touches clocks" in p for p in static_problems(source))


def test_a_jaxbench_candidate_may_define_workload_but_ours_must_define_computation():
    source = "import jax\n\ndef workload(x):\n    return x\n"
    assert static_problems(source, "k.py", JAXBENCH_ENTRIES) == []
    assert static_problems(source) == ["does not define a top-level `computation`"]
