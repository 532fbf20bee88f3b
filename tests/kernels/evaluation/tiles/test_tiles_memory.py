"""What a sampled production run needs against what the process has left
(evaluation/tiles/memory.py). No jax."""

import resource

from maxkernel_tui.kernels import memory
from maxkernel_tui.kernels.evaluation.tiles import memory as tiles_memory
from maxkernel_tui.kernels.evaluation.tiles.memory import KernelBuffers, shortfall

GIB = 2**30


def test_each_kernel_needs_its_interpret_copies_on_top_of_the_outputs_kept_before_it():
    first = KernelBuffers("matmul", operand_bytes=1 * GIB, output_bytes=2 * GIB)
    second = KernelBuffers("softmax", operand_bytes=2 * GIB, output_bytes=1 * GIB)
    assert shortfall([first], room=8 * GIB) is None  # 2.5 x 3 GiB and a quarter of margin
    assert "matmul's production operands and outputs (3.0 GiB)" in (
        shortfall([first], room=7.5 * GIB) or ""
    )
    # the second alone fits in 9 GiB; with the first's 2 GiB output kept, it needs 9.75
    assert shortfall([second], room=9 * GIB) is None
    problem = shortfall([first, second], room=9 * GIB) or ""
    assert problem.startswith("softmax's") and "about 9.8 GiB" in problem
    assert shortfall([first, second], room=None) is None  # nothing known: not refused


def test_the_room_is_the_address_space_limit_less_what_is_mapped(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: None)
    monkeypatch.setattr(memory, "process_bytes", lambda field: 3 * GIB)  # 3 GiB mapped
    monkeypatch.setattr(resource, "getrlimit", lambda which: (8 * GIB, 8 * GIB))
    assert tiles_memory.memory_room() == 5 * GIB
    monkeypatch.setattr(memory, "available_bytes", lambda: 2 * GIB)  # 2 GiB free
    assert tiles_memory.memory_room() == 2 * GIB
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY,) * 2)
    monkeypatch.setattr(memory, "available_bytes", lambda: None)
    assert tiles_memory.memory_room() is None


def test_this_process_reads_its_own_figures():
    assert (memory.process_bytes("VmSize") or 0) > 0
    assert (memory.available_bytes() or 0) > 0
    assert memory.process_bytes("NoSuchField") is None
