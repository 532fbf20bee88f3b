"""The coverage table's measured column (benchmarks/builtin_agent_coverage.py): a task's speedup
measured on a v5e is shown only where the kernel measured is the one the row estimates (the
record's estimate is the row's); a kernel drafted again since, a record without a measurement
and a task never measured show '-'."""

from __future__ import annotations

from benchmarks.builtin_agent_coverage import Row, measured_speedups, readme_table


def _row(task: str, estimate_ms: float) -> Row:
    return Row(task, "matmul + element-wise epilogue", "accepted", "", estimate_ms=estimate_ms)


def _record(estimate_ms: float, speedup: float | None) -> dict:
    measured = {"vs_xla_tolerance": {"ratio": speedup}} if speedup is not None else {}
    return {"model": {"kernel_ms": estimate_ms}, **measured}


def test_a_measured_speedup_is_shown_only_for_the_kernel_measured():
    rows = [_row("18k", 2.934), _row("39k", 1.7), _row("41k", 8.698), _row("1p", 8.5)]
    records = {
        "18k": _record(2.934, 1.0222),  # this very kernel
        "39k": _record(1.9, 0.44),  # an earlier kernel of 39k: another estimate
        "41k": _record(8.698, None),  # recorded, not measured (an error)
    }
    assert measured_speedups(rows, records) == {"18k": 1.0222}
    table = readme_table(rows, "cmd", measured_speedups(rows, records))
    lines = {line.split("|")[1].strip(): line.split("|") for line in table.splitlines()[4:]}
    assert lines["18k"][7].strip() == "1.02x"
    assert [lines[t][7].strip() for t in ("39k", "41k", "1p")] == ["-", "-", "-"]
    assert "meas. vs XLA@tolerance (v5e)" in table.splitlines()[2]
