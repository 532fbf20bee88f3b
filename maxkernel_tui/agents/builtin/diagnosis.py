"""The built-in profiler: a profile summary (kernels/perf/summary.py, as JSON) in, a short
diagnosis and the single next thing to try out. Reads figures only; no jax here.

The rules go from what stops a kernel from running at all (VMEM), through what wastes the
hardware most (per-step overhead, re-fetched operands, f32 MXU passes), to "close to the
roofline": the first that applies gives the `Next:` line.
"""

from __future__ import annotations

from typing import Any

from maxkernel_tui.kernels.perf.model import F32_MXU_SLOWDOWN, TINY_STEP_BYTES

# A kernel within this share of the roofline has little left to gain from tiling.
NEAR_ROOFLINE = 0.8


def diagnose(profile: dict[str, Any], target: str) -> str:
    """Markdown: what the profile says, then one line starting `Next:`."""
    kernels: list[dict[str, Any]] = profile.get("kernels") or []
    estimates: list[dict[str, Any]] = profile.get("estimates") or []
    found = next(
        (e for e in estimates if e.get("target") == target), estimates[0] if estimates else None
    )
    lines = [
        (
            f"## Diagnosis ({found['target'] if found else target}, figures estimated by the performance "
            "model unless marked measured)"
        ),
        "",
    ]
    if found is not None:
        share = found.get("roofline_share")
        lines.append(
            f"- {found['seconds'] * 1e3:.3f} ms, {found['bound']}-bound; "
            f"{'%.0f%% of the roofline' % (share * 100) if share is not None else 'roofline unknown'}; "
            f"VMEM {found['vmem_bytes'] / 2**20:.1f} of {found['vmem_capacity'] / 2**20:.0f} MiB; "
            f"HBM traffic {found['hbm_bytes'] / 1e9:.3g} GB."
        )
    for index, kernel in enumerate(kernels):
        lines.append(
            f"- kernel {index} `{kernel['name']}`: grid {kernel['grid']} "
            f"{kernel.get('dimension_semantics') or ''}, {kernel['steps']} steps, "
            f"{_per_step_bytes(kernel) / 1024:.0f} KiB from HBM per step."
        )
    warnings = (profile.get("warnings") or {}).get(found["target"] if found else target, [])
    lines += [f"- warning: {warning}" for warning in warnings]
    lines += [f"- not available: {problem}" for problem in profile.get("problems") or []]
    lines += ["", "Next: " + next_step(kernels, found, warnings)]
    return "\n".join(lines) + "\n"


def next_step(
    kernels: list[dict[str, Any]], found: dict[str, Any] | None, warnings: list[str]
) -> str:
    if not kernels:
        return "write the computation as a pallas_call: the profile found no Pallas kernel to tune."
    if found is not None and not found.get("fits_vmem", True):
        return (
            "halve the largest block size (BLOCK_ROWS or BLOCK_COLS): the VMEM footprint "
            f"{found['vmem_bytes'] / 2**20:.1f} MiB is over the {found['vmem_capacity'] / 2**20:.0f} MiB there is."
        )
    if any("(8, 128)" in w for w in warnings):
        return (
            "make each block's last two dimensions multiples of (8, 128) or the array's own sizes."
        )
    busiest = max(kernels, key=lambda k: k["steps"])
    if (found is not None and found["bound"] == "overhead") or (
        busiest["steps"] > 64 and _per_step_bytes(busiest) < TINY_STEP_BYTES
    ):
        return (
            f"raise the block sizes of `{busiest['name']}`: {busiest['steps']} grid steps moving "
            f"{_per_step_bytes(busiest) / 1024:.0f} KiB each pay the per-step overhead more than the work."
        )
    share = found.get("roofline_share") if found is not None else None
    if share is not None and share >= NEAR_ROOFLINE:
        return (
            f"stop tuning the tiles: the estimate is at {share:.0%} of the roofline; only fusing more of the "
            "computation into the kernel, or a different algorithm, would gain more."
        )
    if found is not None and found["bound"] == "compute":
        if any(k.get("mxu_f32_flops_per_step") for k in kernels):
            return (
                f"feed the MXU bf16 operands with f32 accumulation if the tolerance allows: f32 matmuls take "
                f"about {F32_MXU_SLOWDOWN:.0f} passes."
            )
        return "cut the vector work per step (transcendentals, casts, broadcasts recomputed in the body)."
    return (
        "raise BLOCK_ROWS and BLOCK_COLS (or BLOCK_DEPTH for a matmul) so each operand is fetched from HBM "
        "fewer times: the kernel is memory-bound below the roofline."
    )


def _per_step_bytes(kernel: dict[str, Any]) -> float:
    return kernel["hbm_bytes"] / max(kernel["steps"], 1)
