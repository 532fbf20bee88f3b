"""What a sampled production run needs against what the process has left
(evaluation/tiles/memory.py). No jax."""

import resource

from maxkernel_tui.kernels import memory
from maxkernel_tui.kernels.evaluation.tiles import memory as tiles_memory
from maxkernel_tui.kernels.evaluation.tiles.memory import (
    KernelBuffers,
    compact_shortfall,
    shortfall,
)

GIB = 2**30


def test_each_kernel_needs_its_outputs_the_values_alive_beside_it_and_the_final_outputs():
    """Production values are dropped after their last use; the provenance pass runs beside the
    program's outputs of the first pass (13p's logits twice ran out of 8 GiB)."""
    first = KernelBuffers("matmul", output_bytes=2 * GIB, live_bytes=0)
    second = KernelBuffers("softmax", output_bytes=1 * GIB, live_bytes=2 * GIB)
    assert shortfall([first], 1 * GIB, room=3.25 * GIB) is None  # 2 + 1 and a quarter of margin
    problem = shortfall([first], 1 * GIB, room=3 * GIB) or ""
    assert problem.startswith("matmul's production outputs (2.0 GiB)")
    assert shortfall([second], 0, room=3.25 * GIB) is None
    problem = shortfall([first, second], 1 * GIB, room=4 * GIB) or ""
    assert problem.startswith("softmax's") and "about 4.2 GiB" in problem
    assert shortfall([first, second], 1 * GIB, room=None) is None  # nothing known: not refused


def test_a_sampled_kernel_needs_interpret_copies_of_its_compact_buffers_only():
    # 1 GiB handed to the interpreter (2.5 GiB of copies) and 2 GiB placed back, and the margin
    assert compact_shortfall("matmul", 1 * GIB, 2 * GIB, room=4.75 * GIB) is None
    problem = compact_shortfall("matmul", 1 * GIB, 2 * GIB, room=4.5 * GIB) or ""
    assert problem.startswith("matmul's sampled operands and outputs (1.0 GiB)")
    assert "about 4.8 GiB" in problem
    assert compact_shortfall("matmul", 1 * GIB, 2 * GIB, room=None) is None


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
