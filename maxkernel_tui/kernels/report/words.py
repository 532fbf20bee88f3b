"""A check's reason and figures in words: the one place a check's sentence is made (reports,
panes, the CLI and prompts show it). Plain data in, a string out; no jax."""

from __future__ import annotations

from maxkernel_tui.kernels.report.basis import SPEEDUP
from maxkernel_tui.kernels.report.expert import EXPERT_SPEEDUP, ExpertComparison
from maxkernel_tui.kernels.report.reasons import (
    Agreement,
    At,
    Bodies,
    Comparison,
    Configs,
    Confinement,
    Coverage,
    Defence,
    DefenceOutcome,
    Defences,
    DeviceNumerics,
    Figures,
    Finding,
    MatmulWork,
    Misfit,
    Mismatch,
    NotJudged,
    OutsidePallas,
    Problems,
    ProductionSize,
    Ratio,
    Reason,
    RunFigures,
    Said,
    Target,
    TilesFigures,
    Timed,
    TracerClaim,
    Unbelievable,
    Unfit,
    WorkerFailed,
    WorkShare,
)

R = Reason
# Reasons whose words need no figures.
_FIXED = {
    R.STATIC_OK: "parses, defines computation, no host callback or platform branch",
    R.NO_PALLAS_CALL: "no pallas_call: the work runs in plain XLA (jnp), not in a Pallas kernel",
    R.LOWERED: "lowered for TPU (Mosaic) at production shapes",
    R.NO_CHECK_CONFIG: "no check configuration to compare production shapes with",
    R.NO_EDGE_CONFIGS: "this task's get_inputs takes no named configurations: "
    "no extra edge-case configurations",
    R.BACKWARD_NO_PALLAS_CALL: "the backward (jax.vjp of computation) has no pallas_call: "
    "its work runs in plain XLA",
    R.NO_TPU: "not measured: no TPU on this machine; times in TPU interpret mode on a "
    "CPU are a simulator's, not the kernel's, so none are shown",
    R.NO_SANDBOX_POLICY: "WITHOUT the sandbox: started with no policy",
}
# Reasons whose words are a fixed head before someone else's (Said).
_SAID = {
    R.SOURCE_UNREADABLE: "cannot read {}",
    R.SNAPSHOT_FAILED: "cannot snapshot the task: {}",
    R.TASK_CHANGED: "the task changed during the evaluation ({}): its verdict is void",
    R.HARNESS_ERROR: "harness error: {}",
    R.WORKER_TIMED_OUT: "the kernel {}",
    R.SANDBOX_REFUSED: "the kernel tried what the sandbox refuses: {}",
    R.TRACER_NOT_PROTOCOL: "the tracer wrote what is not the protocol: {}",
    R.TRACER_NO_PROGRAM: "the tracer sent no program for {}",
    R.TRACE_REFUSED: "{}",
    R.IMPORT_FAILED: "the kernel fails to import: {}",
    R.UNTRACEABLE: "{}",
    R.BACKWARD_UNTRACEABLE: "{}",
    R.PROGRAM_UNWRITABLE: "its program could not be written in its directory: {}",
    R.SANITY_RUN: "sanity run (no Pallas required): {}",
    R.LOWERING_FAILED: "cannot be lowered for TPU at production shapes: {}",
    R.NO_PROGRAM_AT_CHECK: "defences not applied: no program at check shapes: {}",
    R.DEFENCES_UNMEASURABLE: "defences not applied: the kernels could not be measured: {}",
    R.PRODUCTION_REFUSED: "{}",
    R.REFERENCE_FAILED: "cannot compute the reference: {}",
    R.TILES_NOT_RUN: "production tiles not run: {}",
    R.TILES_REFERENCE_FAILED: "production tiles not compared: the reference failed: {}",
    R.TIMING_BUSY: "not measured: {}",
    R.TIMING_FAILED: "not measured: the timing process failed: {}",
    R.TIMING_NOT_ON_TPU: "not shown: measured on {}, which is not a TPU",
    R.WORDS_ONLY: "{}",
}


def check_words(reason: Reason, figures: Figures) -> str:
    """The sentence a check with this reason and these figures shows."""
    if reason in _FIXED:
        return _FIXED[reason]
    if reason in _SAID and isinstance(figures, Said):
        return _SAID[reason].format(figures.text)
    match figures:
        case At(config, text) if reason == R.PROGRAM_REFUSED:
            return f"the program traced at {config!r} is refused: {text}"
        case At(expert, text) if reason == R.EXPERT_NOT_COMPARED:
            return f"not compared with the expert {expert}: {text}"
        case Configs(configs):
            return f"the tracer sent no program for {list(configs)}"
        case Problems(problems):
            return "; ".join(p.text for p in problems)
        case Unbelievable(claim, name, status):
            claimed = _CLAIMS[claim].format(name=name, status=status)
            return f"the tracer {claimed}: the kernel is rejected"
        case WorkerFailed(process, text, limit):
            return _worker_words(reason, process, text, limit)
        case WorkShare() if reason == R.BACKWARD_IN_PALLAS:
            return (
                f"backward (jax.vjp of computation, {figures.outputs}): "
                f"{figures.pallas_calls} pallas_call(s); heavy work inside Pallas (outside: "
                f"{figures.xla_flops:.3g} flops, {figures.xla_reduced:.3g} reduced elements)"
            )
        case WorkShare():
            return (
                f"{figures.pallas_calls} pallas_call(s); heavy work inside Pallas (outside: "
                f"{figures.xla_flops:.3g} flops, {figures.xla_reduced:.3g} reduced elements); "
                f"{figures.outputs}"
            )
        case OutsidePallas() if reason == R.EXPERT_WORK_OUTSIDE_PALLAS:
            return (
                "the task's expert baseline, so reported, not rejected: "
                f"{_outside_words(figures)}; {figures.outputs}"
            )
        case OutsidePallas() if reason == R.BACKWARD_WORK_OUTSIDE_PALLAS:
            return f"the backward (jax.vjp of computation): {_outside_words(figures)}"
        case OutsidePallas():
            return _outside_words(figures)
        case Target(name, text) if reason == R.COMPILE_FAILED:
            return f"TPU {name} compile failed: {text}"
        case Target(name):
            return f"compiled ahead of time for TPU {name} with libtpu"
        case Defences(defences) if reason in (R.DEFENCES_BROKEN, R.BACKWARD_DEFENCES_BROKEN):
            failed = [defence_words(d) for d in defences if d.outcome == DefenceOutcome.FAILED]
            whose = "the backward " if reason == R.BACKWARD_DEFENCES_BROKEN else ""
            return f"{whose}at production shapes: " + "; ".join(failed)
        case Defences(defences) if reason == R.BACKWARD_DEFENCES_HELD:
            return "backward: " + "; ".join(f"{d.name}: {d.outcome}" for d in defences)
        case Defences(defences):
            return "; ".join(f"{d.name}: {d.outcome}" for d in defences)
        case Unfit():
            return _unfit_words(figures)
        case NotJudged(configs, tiles, tiles_figures):
            asked = check_words(tiles, tiles_figures) if tiles else _NO_TILES
            return (
                "not judged: the kernel's own tiles do not fit the derived configurations "
                f"({', '.join(configs)}) and its outputs were compared at production shapes "
                f"nowhere here ({asked}); a kernel is not accepted on no evidence (on a TPU its "
                "production shapes run in full)"
            )
        case Agreement(runs):
            described = "; ".join(f"{_run_label(r)} {comparison_words(r.comparison)}" for r in runs)
            return f"{len(runs)} run(s) within tolerance; {described}"
        case RunFigures():
            return f"{_run_label(figures)}: {_run_words(reason, figures)}"
        case TilesFigures():
            return _tiles_words(reason, figures)
        case Timed():
            return _timed_words(figures)
        case DeviceNumerics():
            return f"wrong result {device_numerics_words(figures)}"
        case ExpertComparison():
            return figures.label
        case Confinement(active, missing, lacking) if reason == R.SANDBOX_LAYERS_MISSING:
            why = "; ".join(f"{layer}: {dict(missing)[layer]}" for layer in lacking)
            return (
                f"WITHOUT the sandbox (opted out): {why}; in force: {', '.join(active) or 'none'}"
            )
        case Confinement(active):
            return f"the kernel ran confined: {', '.join(active) or 'none'}"
    raise ValueError(f"no words for {reason} with {figures!r}")


def _outside_words(outside: OutsidePallas) -> str:
    return (
        f"heavy work runs in XLA outside the Pallas kernel(s): {outside.xla_flops:.3g} flops and "
        f"{outside.xla_reduced:.3g} reduced elements outside, against the reference's "
        f"{outside.reference_flops:.3g} flops and {outside.reference_reduced:.3g} "
        f"(e.g. {'; '.join(outside.heavy_ops[:3])})"
    )


def defence_words(defence: Defence) -> str:
    """What a production defence found, in words."""
    figures, found = defence.figures, defence.finding
    match figures:
        case MatmulWork():
            return _work_words(found, figures)
        case Coverage(covered, checked) if found == Finding.COVERAGE_SHRINKS:
            return (
                f"the grid writes only {covered:.1%} of an output (left to stale memory), "
                f"against {checked:.1%} at the checked shapes"
            )
        case Coverage(covered):
            return f"output blocks cover {covered:.0%} of every output"
        case Bodies() if found == Finding.OPERATIONS_DROPPED:
            return (
                "the kernel body differs from the one the numerics checked: it no longer uses "
                + ", ".join(figures.dropped)
            )
        case Bodies() if found == Finding.MATMUL_TYPES_CHANGED:
            return (
                "the kernel's matmuls change operand types: "
                f"{list(figures.matmul_types)} instead of {list(figures.checked_matmul_types)}"
            )
        case Bodies(kernels, checked_kernels):
            return (
                f"{kernels} kernel(s) use the operations and matmul types checked "
                f"with {checked_kernels}"
            )
        case ProductionSize():
            return (
                f"production shapes too large for interpret mode ({figures.flops:.3g} "
                f"flops, {figures.steps} grid steps, {figures.input_bytes / 2**20:.0f} "
                f"MiB of inputs; limits {figures.flops_limit:.0g}, {figures.steps_limit}, "
                f"{figures.bytes_limit / 2**20:.0f} MiB) and no TPU here"
            )
    return _DEFENCE_FIXED[found]


_NO_TILES = "no production tiles were asked for"
_CLAIMS = {
    TracerClaim.JUDGES_CHECK: "claimed a {status} {name!r} check, which only the judge gives",
    TracerClaim.UNASKED_PROGRAM: "sent a program for {name!r}, which was not asked for or came "
    "twice",
    TracerClaim.JUDGES_EVENT: "sent a {name}, which only the judge sends",
}
_DEFENCE_FIXED = {
    Finding.NO_REFERENCE_WORK: "the reference does no matmul work",
    Finding.COVERAGE_UNKNOWN: "outputs written by DMA, through data-dependent index maps, "
    "or over a huge grid",
    Finding.NO_KERNELS: "no pallas_call to compare",
    Finding.RUN_ON_TPU: "production shapes run on the TPU",
    Finding.RUN_INTERPRETED: "production shapes run in TPU interpret mode (affordable)",
    Finding.TILES_TO_RUN: "sampled output tiles of the production grid run in TPU interpret mode",
}


def _work_words(found: Finding, work: MatmulWork) -> str:
    summary = (
        f"kernel {work.flops:.3g} matmul flops against the reference's {work.needed:.3g} "
        f"({work.flops / work.needed:.2f}x) at {work.config}"
    )
    if work.conditional > 0:
        summary += (
            f"; {work.conditional:.3g} of them under cond/pl.when, counted as if every branch "
            "taken ran its most expensive side (conditional: the production tiles say whether "
            "they do)"
        )
    if found == Finding.NO_KERNEL_WORK:
        return f"the kernel does no matmul work: {summary}"
    if found == Finding.DATA_DEPENDENT_WORK:
        return (
            "the kernel's work depends on data (while loops or scalar-prefetch index maps): "
            f"{summary}"
        )
    if found == Finding.TOO_LITTLE_WORK:
        return (
            f"the kernel does less matmul work than the reference needs (at least "
            f"{work.floor:.1f}x; padding only adds): {summary}"
        )
    return summary


def _unfit_words(unfit: Unfit) -> str:
    """A derived configuration left unrun for its misfit, and where the kernel's numerics are
    judged instead: the numerics defence's outcome, or the full evaluation that an edge-case
    pass joins (EvalReport.with_edge_pass)."""
    where = {
        DefenceOutcome.SCHEDULED: "its numerics are judged at production shapes only",
        DefenceOutcome.SAMPLED: "its numerics are judged at production tiles only",
    }.get(unfit.numerics, "its production shapes do not run here either")
    if unfit.edge_pass:
        where = "its numerics are judged at production shapes by the full evaluation"
    return f"{unfit.config}: not run — {misfit_words(unfit.misfit, unfit.config)}; {where}"


def misfit_words(misfit: Misfit, config: str) -> str:
    """Which of the kernel's tiles does not fit the derived configuration `config`."""
    words = (
        f"the kernel's tiles (block {misfit.block} along axis {misfit.axis} of output "
        f"{misfit.output} of {misfit.kernel}) do not fit the derived {config} shapes "
        f"({misfit.size})"
    )
    if misfit.untraced:
        return f"{words}, and the kernel refused to be traced there: {misfit.untraced}"
    return words


def _worker_words(reason: Reason, process: str, text: str, limit: float | None) -> str:
    if reason == R.WORKER_TIMED_OUT:
        return f"the kernel {text}"
    if reason == R.WORKER_OUT_OF_MEMORY:
        within = f" (limit {limit:.0f} GiB)" if limit else ""
        return f"out of memory{within}: the {process} process {text}"
    return f"the {process} process crashed: {text}"


def _run_label(run: RunFigures) -> str:
    gradient = f" gradient of {run.gradient}" if run.gradient else ""
    return f"{run.config} seed {run.seed}{gradient}"


def _run_words(reason: Reason, run: RunFigures) -> str:
    if reason == R.NO_OUTPUT:
        return "the kernel produced no output"
    if reason == R.KERNEL_FAILED:
        return f"the kernel failed: {run.error}"
    if reason == R.REFERENCE_RUN_FAILED:
        return f"the reference failed: {run.error}"
    if reason == R.RACE_DETECTED:
        return "TPU interpret mode detected a race between grid steps or DMAs"
    if run.gradient:
        return (
            f"wrong gradient (atol {run.atol:g}, rtol {run.rtol:g}): "
            f"{comparison_words(run.comparison)}"
        )
    return (
        f"wrong numerics (atol {run.atol:g}, rtol {run.rtol:g}): {comparison_words(run.comparison)}"
    )


def comparison_words(comparison: Comparison | None) -> str:
    """A comparison's figures in words: what failed, or how close it came."""
    if comparison is None:
        return "not compared"
    if comparison.mismatch == Mismatch.OUTPUT_COUNT:
        return f"{comparison.got[0]} outputs instead of {comparison.wanted[0]}"
    if comparison.mismatch == Mismatch.OUTPUT_SHAPE:
        return f"output shape {list(comparison.got)} instead of {list(comparison.wanted)}"
    if comparison.mismatch == Mismatch.NON_FINITE:
        kind = "NaN" if comparison.first_is_nan else "infinite"
        return (
            f"{comparison.non_finite}/{comparison.total} outputs are NaN or infinite (first "
            f"{kind} at {list(comparison.first_non_finite)}); in TPU interpret mode unwritten "
            "memory reads as NaN: is every output block written?"
        )
    where = f" at {list(comparison.worst_index)}" if comparison.worst_index else ""
    summary = (
        f"max|Δ| {comparison.max_abs:.3g}{where}, max rel {comparison.max_rel:.3g} "
        f"(where |ref| > atol), {comparison.tolerance_used:.0%} of tolerance"
    )
    if comparison.ok:
        return summary
    return f"{comparison.mismatched}/{comparison.total} elements outside tolerance; {summary}"


def sampled_blocks_words(tiles: TilesFigures) -> str:
    """`8 of 128 output blocks covering 3 classes` (classes of blocks by the kernels' scalar
    control; none said by a run from before them)."""
    kinds = "class" if tiles.classes == 1 else "classes"
    covering = f" covering {tiles.classes} {kinds}" if tiles.classes else ""
    return f"{tiles.blocks} of {tiles.of_blocks} output blocks{covering}"


def _tiles_words(reason: Reason, tiles: TilesFigures) -> str:
    label = f"{tiles.config} inputs seed {tiles.input_seed}, sample seed {tiles.sample_seed}"
    if tiles.gradients:  # a sample of the backward's kernels
        of = "gradient" if reason == R.TILES_OUTSIDE_TOLERANCE else "gradients"
        label = f"backward ({of} of {tiles.gradients}), {label}"
    if reason == R.TILES_NOT_RUN:
        return f"production tiles not run: {tiles.text}"
    if reason == R.TILES_KERNEL_FAILED:
        return f"{label}: the kernel failed on sampled production tiles: {tiles.text}"
    if reason == R.TILES_OUTPUT_COUNT:
        return f"{label}: {tiles.outputs} outputs instead of {tiles.expected}"
    if reason == R.TILES_MALFORMED:
        return f"{label}: malformed tile files"
    if reason == R.TILES_OUTSIDE_TOLERANCE:
        return (
            f"{label}: wrong numerics at production shapes on sampled output tiles "
            f"(atol {tiles.atol:g}, rtol {tiles.rtol:g}): {comparison_words(tiles.comparison)}"
        )
    if reason == R.TILES_STATE_CARRIED:
        return (
            f"{label}: the kernel carries state from one output block to the next (undefined "
            f"when the grid's parallel axes are split across cores): {tiles.text}"
        )
    if reason == R.TILES_OUTPUT_REVISITED:
        return (
            f"{label}: an output block is written, left and written again (its first values "
            f"are lost on a TPU): {tiles.text}"
        )
    if reason == R.TILES_NONE_DECIDED:
        return (
            f"production tiles not compared ({label}): no output element is decided by the "
            "sampled blocks alone (the XLA after the kernels mixes every block)"
        )
    if reason in (R.TILES_PROJECTED_OUTSIDE, R.TILES_LEFT_TO_DEVICE):
        then = (
            "the device's comparison of the whole production output decides"
            if reason == R.TILES_LEFT_TO_DEVICE
            else f"outside it on about {tiles.projected_over} of {tiles.of_elements} elements"
        )
        return (
            f"{label}: imprecise at production shapes: {tiles.elements} sampled elements within "
            f"tolerance (atol {tiles.atol:g}, rtol {tiles.rtol:g}), but {_projected_words(tiles)}"
            f"; {then}"
        )
    worst = comparison_words(tiles.comparison)
    projected = f"; {_projected_words(tiles)}" if tiles.projected is not None else ""
    left = f"; {tiles.text}" if tiles.gradients and tiles.text else ""
    return (
        f"{sampled_blocks_words(tiles)} sampled at production shapes "
        f"({label}), {tiles.elements} elements within tolerance; {worst}{projected}{left}"
    )


def _projected_words(tiles: TilesFigures) -> str:
    """The largest share of the tolerance over the whole output, projected from the sampled
    elements' error distribution (estimated) or seen on every element (measured)."""
    share = tiles.projected or 0.0
    # a share under 1% with its own digits: an exact kernel reads 0%, a close one 0.01%
    used = f"{share:.0%}" if share >= 0.01 or share == 0 else f"{share * 100:.1g}%"
    if tiles.projected_from >= tiles.of_elements:
        return f"the largest error uses {used} of the tolerance (measured: every element)"
    return (
        f"the largest error over the whole output is projected to use {used} of the "
        f"tolerance (estimated from the tail of {tiles.projected_from} of its "
        f"{tiles.of_elements} elements)"
    )


def ratio_words(ratio: Ratio) -> str:
    """A speedup with its interval and whether it is significant either way."""
    verdict = (
        "significant"
        if ratio.low > 1.0
        else "significantly slower"
        if ratio.high < 1.0
        else "not significant"
    )
    return f"{ratio.ratio:.2f}x (95% CI {ratio.low:.2f}-{ratio.high:.2f}, {verdict})"


def _timed_words(timed: Timed) -> str:
    versus_expert = (
        "the task has no expert Pallas kernel"
        if timed.expert is None
        else f"{EXPERT_SPEEDUP} {ratio_words(timed.expert)}"
    )
    numerics = timed.device_numerics
    device = f"; {device_numerics_words(numerics)}" if numerics else ""
    clock = clock_words(timed.device_clock, timed.clock_note)
    speedup = f"{SPEEDUP} as written {ratio_words(timed.speedup)}"
    return f"{speedup} ({clock}); {versus_expert}{device}"


def device_numerics_words(numerics: DeviceNumerics) -> str:
    """The device's comparison of the candidate with the reference at production shapes."""
    where = f"on the device at {numerics.config} shapes"
    if numerics.ok:
        return f"{where}: within the task's tolerance"
    if numerics.comparison is None:
        return f"{where}: {numerics.outputs} outputs instead of {numerics.expected}"
    return f"{where}, output {numerics.output}: {comparison_words(numerics.comparison)}"


def clock_words(device_clock: bool, note: str = "") -> str:
    """How timing samples were measured, with the reason for a wall-clock fallback."""
    if device_clock:
        return "device time from the profiler trace"
    words = "wall time around block_until_ready (dispatch included)"
    return f"{words}; no device trace: {note}" if note else words
