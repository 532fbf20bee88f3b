"""Our library of TPU optimisation strategies for the graph search.

Each expansion of a search node asks the implementer to apply one strategy to the parent
kernel; the strategy's instruction is pasted into that request. Instructions say what to change
and what to watch for, in the terms of the knowledge pack (agents/knowledge). A strategy
applies to the task families in `applies_to` (the `category` of a suite task), or to every
family when that set is empty.
"""

from __future__ import annotations

from dataclasses import dataclass

from maxkernel_tui.kernels.perf.analysis import Bound

# The task families of the built-in suite (kernel_task.yaml `category`).
FAMILIES = frozenset(
    {"attention", "gemm", "kb-gemm", "kb-conv", "loss", "moe", "norm", "ssm", "triangle"}
)

_MATMUL = frozenset({"gemm", "kb-gemm", "kb-conv", "moe", "ssm", "triangle", "attention"})
_GEMM = frozenset({"gemm", "kb-gemm", "kb-conv", "moe", "triangle"})
_ROWWISE = frozenset({"norm", "loss"})
_GATHERS = frozenset({"attention", "moe"})


@dataclass(frozen=True)
class Strategy:
    name: str  # stable identifier, stored with each search node
    title: str  # a few words for the search tree view
    instruction: str  # what the implementer should change, and what to watch for
    applies_to: frozenset[str] = frozenset()  # families; empty means every family

    def applies(self, family: str) -> bool:
        return not self.applies_to or family in self.applies_to


def _s(
    name: str, title: str, instruction: str, applies_to: frozenset[str] = frozenset()
) -> Strategy:
    return Strategy(name, title, " ".join(instruction.split()), applies_to)


STRATEGIES: tuple[Strategy, ...] = (
    # -- tiling -------------------------------------------------------------------------------
    _s(
        "grow-row-blocks",
        "larger row blocks",
        """
       Double the row block size (the second-to-last block dimension) while the VMEM footprint
       stays under about half the scoped limit (16 MiB on v5e). Fewer, larger grid steps
       amortise the fixed per-step cost and lengthen each DMA. Keep the row count a multiple
       of 8 (f32), 16 (bf16) or 32 (int8), and keep at least four grid steps so the pipeline
       can overlap copies with compute.""",
    ),
    _s(
        "shrink-row-blocks",
        "smaller row blocks",
        """
       Halve the row block size. Do this when the kernel fails with a scoped VMEM error, when
       the grid has fewer than four steps (the first DMA is then exposed), or when a "parallel"
       axis has a single step and a two-core chip leaves one core idle. Keep the row quantum of
       the dtype (8 / 16 / 32 rows).""",
    ),
    _s(
        "grow-col-blocks",
        "larger column blocks",
        """
       Double the column block size (the last block dimension, N of a matmul's output). The
       left operand is read once per column block, so wider blocks cut its re-reads; the VMEM
       footprint of the weight block and the accumulator grows with it. Keep it a multiple of
       128 lanes (256 on v6e).""",
        _MATMUL,
    ),
    _s(
        "shrink-col-blocks",
        "smaller column blocks",
        """
       Halve the column block size. Do this when the blocks do not fit VMEM, when the row block
       cannot grow because the column block takes the room, or when too few column steps leave
       the pipeline nothing to overlap. Keep it a multiple of 128 lanes.""",
        _MATMUL,
    ),
    _s(
        "grow-depth-blocks",
        "deeper contraction blocks",
        """
       Double the contraction block size (K per step). Fewer K steps mean fewer read-modify-
       writes of the f32 accumulator and fewer per-step overheads; each step's operand blocks
       grow, so check the VMEM footprint.""",
        _MATMUL,
    ),
    _s(
        "square-output-tiles",
        "square output tiles",
        """
       Make the output tile square (bm = bn) and large: 512 on v5e/v4/v5p, 1024 on v6e/tpu7x.
       A t x t tile does about t/2 flops per HBM byte for bf16, which is what it takes to reach
       the compute roofline. Recompute the VMEM footprint (double-buffered x, w and output
       blocks plus the f32 accumulator) and raise vmem_limit_bytes if it exceeds the default.""",
        _GEMM,
    ),
    _s(
        "rebalance-tiles",
        "tall or wide tiles",
        """
       Count HBM traffic: x is read N/bn times and w is read M/bm times. Grow the tile along the
       dimension whose operand is re-read most (bm when w is the larger operand, bn when x is),
       even if the tile becomes rectangular. Keep both dims multiples of the MXU width and
       check the VMEM footprint again.""",
        _GEMM,
    ),
    _s(
        "whole-k",
        "whole K per block",
        """
       If K is small enough that (bm x K + K x bn) blocks fit VMEM twice over, make bk = K: drop
       the K grid axis, the accumulator scratch and the pl.when init/finish branches, and
       compute one dot per step. This removes the read-modify-write of the accumulator. Keep
       the f32 preferred_element_type and cast once on the store.""",
        _MATMUL,
    ),
    _s(
        "split-k",
        "K as the last grid axis",
        """
       When full-K blocks do not fit, add a K grid axis as the last axis, marked "arbitrary",
       with an f32 VMEM scratch accumulator zeroed at k == 0 and written to the output at the
       last k. Choose bk between 512 and 2048 (a multiple of 128; 256 on v6e). The output index
       map must ignore k so the output block stays resident.""",
        _MATMUL,
    ),
    _s(
        "mxu-aligned-blocks",
        "MXU-aligned block sizes",
        """
       Round every block dimension that feeds a dot to the MXU width of the target: multiples
       of 128 on v4, v5e and v5p, of 256 on v6e and tpu7x. A 128-wide operand on a 256x256 MXU
       uses a quarter of it. Pad the operands outside the kernel when the problem size is not a
       multiple, and slice the result afterwards.""",
        _MATMUL,
    ),
    _s(
        "whole-rows",
        "whole rows per block",
        """
       Give each block complete rows (the reduced axis whole) so statistics such as mean,
       variance, max or log-sum-exp need no state across grid steps. Flatten leading dims
       outside the kernel and use a one-axis "parallel" grid over row blocks. Size the rows so
       the in and out blocks, double-buffered, plus f32 temporaries fit VMEM.""",
        _ROWWISE,
    ),
    _s(
        "chunk-wide-rows",
        "chunked wide rows",
        """
       When a row is too wide for a useful row block (large vocabularies, huge hidden sizes),
       add a second grid axis over column chunks, last and "arbitrary", and carry running
       statistics (sum of squares, or running max and sum for softmax) in f32 VMEM scratch.
       Finish on the last chunk; if the statistics are needed to rescale earlier chunks, use
       the online-softmax correction or a second pass.""",
        _ROWWISE | {"attention"},
    ),
    # -- pipelining -----------------------------------------------------------------------------
    _s(
        "single-buffer-constants",
        "single-buffer constant blocks",
        """
       Give blocks whose index never changes (weights reused by every step, scales, biases)
       pipeline_mode=pl.Buffered(1) so they occupy one VMEM buffer instead of two. Spend the
       freed VMEM on larger tiles for the operands that stream. Buffer counts above 2 are not
       accepted by pallas_call in jax 0.10.2, so do not try Buffered(3) there.""",
    ),
    _s(
        "deeper-pipeline",
        "one more buffer per streamed block",
        """
       Give the streamed operands one more pipeline buffer (pipeline_mode=pl.Buffered(n + 1))
       when DMAs are exposed: steps of uneven length, or a memory-bound kernel whose copies
       start late. Only where the installed Pallas accepts the count on pallas_call; it costs
       one more block of VMEM per operand.""",
    ),
    _s(
        "shallower-pipeline",
        "one buffer fewer per streamed block",
        """
       Take a pipeline buffer away from the streamed operands (pl.Buffered(n - 1), never
       below 1) when VMEM, not DMA latency, limits the block sizes. The freed room lets the
       blocks grow; check that the copies stay hidden behind the compute.""",
    ),
    _s(
        "manual-dma-ring",
        "manual DMA ring",
        """
       For irregular gathers that BlockSpecs pipeline poorly, take the operand as pl.ANY and
       run a ring of three or more VMEM slots with pltpu.make_async_copy and a DMA semaphore
       per slot, starting copy c+2 before waiting on copy c. Every started copy must be waited
       on before its slot is reused and before the kernel ends. Keep each copy at least a few
       hundred KiB, or per-DMA overhead dominates.""",
        _GATHERS,
    ),
    _s(
        "skip-redundant-dma",
        "clamp index maps to skip copies",
        """
       For grid steps whose work is skipped with pl.when, make the index map return the same
       block index as the previous step (clamp it with jnp.minimum), so the pipeline does not
       fetch a block nobody reads. Use jax.lax.div rather than // for the clamp arithmetic,
       which breaks the ahead-of-time compile on a CPU host.""",
        _GATHERS,
    ),
    _s(
        "fewer-grid-steps",
        "fewer, fatter steps",
        """
       If the grid has tens of thousands of small steps, fold a batch or head axis into the
       block (several heads or sequences per step) so each step moves at least a few hundred
       KiB. Each step costs a fixed overhead of a fraction of a microsecond regardless of its
       size. Watch the VMEM footprint, which grows with the folded axis.""",
    ),
    # -- fusion ---------------------------------------------------------------------------------
    _s(
        "fuse-epilogue",
        "fuse the epilogue",
        """
       Apply the element-wise tail of the computation (bias, activation, scaling, clamp,
       residual add) to the f32 accumulator in the last-K branch, before the single cast to
       the output dtype. This removes a full read and write of the output through HBM. Pass the
       bias as a (1, bn) block whose index depends only on j.""",
        _GEMM,
    ),
    _s(
        "fuse-rowwise-epilogue",
        "fuse a row-wise epilogue",
        """
       When a matmul is followed by a reduction over its output row (softmax, norm, logsumexp,
       row max or mean), set bn = N so one output block holds whole rows and apply the
       reduction in the last-K branch. This saves writing and re-reading the activation. It
       only pays while N is moderate: the weight is re-read M/bm times and bn = N caps bm by
       VMEM.""",
        frozenset({"kb-gemm", "gemm"}),
    ),
    _s(
        "split-fused-stages",
        "split into two kernels",
        """
       If fusing a row-wise epilogue forces bn = N so wide that bm collapses, split the work:
       a plain tiled matmul writing its output, then a row-wise kernel over that output. One
       extra HBM round trip of the activation often costs less than re-reading the weight many
       times. Compare both versions' estimated bytes before choosing.""",
        frozenset({"kb-gemm", "gemm"}),
    ),
    _s(
        "fuse-prologue",
        "fuse the input transform",
        """
       Apply cheap input transforms (casts, scaling, activation of the input, a normalisation
       whose statistics are known) to the block in VMEM inside the kernel instead of producing
       a transformed copy in HBM before the call. The kernel then reads the raw input once.
       Keep the transform in f32 when the reference does.""",
    ),
    # -- layout ---------------------------------------------------------------------------------
    _s(
        "lane-dense-output",
        "lane-dense last dimension",
        """
       Make the last dimension of each output (and large input) block a multiple of 128, and
       preferably 512 or more, so stores are full-width and DMAs long. If the natural last dim
       is narrow (64, 32, or a handful of channels), reshape outside the kernel so a wider
       contiguous axis comes last, and undo the reshape after the call.""",
    ),
    _s(
        "contract-without-transpose",
        "contract without transposing",
        """
       For x @ W.T or q @ k.T, keep W (or k) in its stored layout and contract over the last
       dims with jax.lax.dot_general dimension numbers (((1,), (1,)), ((), ())). Do not
       transpose in HBM before the call (an extra pass) or explicitly inside the kernel (a
       relayout per step). Adjust the weight BlockSpec to index (j, k) instead of (k, j).""",
        frozenset({"gemm", "kb-gemm", "attention", "moe"}),
    ),
    _s(
        "relayout-outside",
        "re-layout once outside",
        """
       When the input layout puts a small or awkward axis last (NCHW images, channel-first
       tensors), transpose or reshape it once with jnp before the pallas_call so the kernel
       sees a lane-dense, contiguous layout, and transform the result back after. One XLA
       transpose per call is cheaper than a relayout in every grid step; count its bytes in
       the estimate.""",
        frozenset({"kb-conv", "triangle", "ssm"}),
    ),
    _s(
        "conv-as-shifted-matmuls",
        "convolution as shifted matmuls",
        """
       Compute a stride-1 convolution as a sum over kernel taps of matmuls between shifted
       input windows and the tap's (C_in, C_out) weight slice, accumulated in an f32 scratch.
       Put channels on the lane axis (NHWC inside the kernel) and a block of output pixels on
       rows. Load a window with a halo large enough for all taps once per step instead of once
       per tap.""",
        frozenset({"kb-conv"}),
    ),
    # -- precision ------------------------------------------------------------------------------
    _s(
        "bf16-operands",
        "bf16 MXU operands",
        """
       When the reference computes an f32 matmul at default precision, cast the x and w blocks
       to bf16 inside the kernel just before the dot, keeping preferred_element_type=f32. The
       MXU then needs one pass instead of several. Check the task tolerance on several seeds,
       and never do this where the reference asks for Precision.HIGHEST.""",
        _MATMUL,
    ),
    _s(
        "f32-accumulator",
        "f32 accumulation",
        """
       Accumulate partial products in an f32 VMEM scratch (or an f32 output block) and cast to
       the output dtype once at the end. Accumulating bf16 partial sums across K steps loses
       digits and fails tight tolerances on long contractions. Make sure every dot passes
       preferred_element_type=jnp.float32.""",
        _MATMUL,
    ),
    _s(
        "f32-statistics",
        "f32 statistics, one cast",
        """
       Compute reductions (sums of squares, max, log-sum-exp, decay products) in f32 from the
       loaded block and cast to the output dtype once. Reproduce the reference's rounding
       order where it casts intermediate values to bf16, since tight tolerances notice the
       difference.""",
        _ROWWISE | {"attention", "ssm"},
    ),
    # -- scalar prefetch ------------------------------------------------------------------------
    _s(
        "scalar-prefetch-indices",
        "scalar-prefetched indices",
        """
       Move data-dependent indices (page tables, expert or group ids, sequence lengths, tile
       offsets) into scalar-prefetch operands with pltpu.PrefetchScalarGridSpec, and read them
       in the index maps so the pipeline fetches the right block ahead of time. Compute the
       tables with jnp before the call, as int32. Clamp every looked-up block index to the
       array's range.""",
        _GATHERS,
    ),
    _s(
        "work-list-grid",
        "grid over non-empty work only",
        """
       Instead of a dense grid with pl.when skipping empty blocks, prefetch a list of the
       non-empty (row block, column block) work items and let the grid run over the list.
       Skipped steps then cost neither the per-step overhead nor a DMA. The grid length must
       be static, so size it by an upper bound and make trailing padding items repeat the last
       block index.""",
        _GATHERS,
    ),
    _s(
        "group-aligned-tiles",
        "tiles aligned to groups",
        """
       For grouped or ragged matmuls, pad each group's rows to a multiple of the row block
       outside the kernel (or build per-tile group ids), so that each row tile belongs to one
       group and reads one weight. Masks at group boundaries disappear and the weight index
       map becomes a single lookup. Count the padding's extra flops against the saved
       masking.""",
        frozenset({"moe"}),
    ),
    # -- grid order and semantics ---------------------------------------------------------------
    _s(
        "parallel-semantics",
        "mark independent axes parallel",
        """
       Set pltpu.CompilerParams(dimension_semantics=...) with "parallel" for every grid axis
       whose steps write disjoint outputs and "arbitrary" for reduction axes, which must come
       last. On megacore chips (v4, v5p) the parallel axes are split across the two
       TensorCores, so keep the outermost parallel extent even and at least 2.""",
    ),
    _s(
        "reorder-grid-for-reuse",
        "grid order for reuse",
        """
       Order the grid so the innermost axis is one along which the largest operand's block
       index does not change: consecutive steps with the same index skip its DMA. For a whole-K
       matmul with a big weight, make the row axis innermost so each weight block is fetched
       once per column block. Keep reduction axes last regardless.""",
    ),
    # -- attention and sequence mixing ----------------------------------------------------------
    _s(
        "causal-block-skip",
        "skip masked causal blocks",
        """
       Skip kv blocks that lie entirely above the causal diagonal with pl.when on the block
       positions, and clamp the kv index map so those steps fetch nothing. Apply the iota mask
       only in blocks that straddle the diagonal. This halves the work of causal attention;
       keep the first kv block unskipped so every row has a finite running max.""",
        frozenset({"attention"}),
    ),
    _s(
        "online-softmax",
        "online softmax",
        """
       Never write the score matrix to HBM: keep a running max, a running denominator and an
       f32 output accumulator in VMEM scratch across kv blocks, rescale them by exp(old max -
       new max) at each block, and divide once at the end. The kv axis is the last grid axis and
       "arbitrary". The same trick computes cross-entropy over a vocabulary in chunks.""",
        frozenset({"attention", "loss"}),
    ),
    _s(
        "grouped-query-blocks",
        "share kv blocks across query heads",
        """
       With grouped-query or multi-query attention, index the kv operand by the query head's
       group instead of repeating k and v in HBM, and put all query heads of a group into one
       row block so each kv block is loaded once for the whole group. This also gives the MXU
       more rows in decode, where a single query per head is too few.""",
        frozenset({"attention"}),
    ),
    _s(
        "chunked-scan",
        "chunked scan with matmuls",
        """
       For linear recurrences (retention, state-space scans), split the sequence into chunks:
       inside a chunk compute the outputs with masked matmuls against a decay matrix built from
       iotas, and carry the recurrent state across chunks in an f32 VMEM scratch along a last,
       "arbitrary" grid axis. Choose the chunk length (64-256) to balance MXU work against the
       quadratic intra-chunk cost.""",
        frozenset({"ssm"}),
    ),
    # -- HBM traffic ----------------------------------------------------------------------------
    _s(
        "recompute-not-load",
        "recompute instead of loading",
        """
       In a memory-bound kernel, recompute values that are cheap to derive (masks, position
       biases, decay factors, normalisation statistics of a small block) from iotas or loaded
       data rather than reading a precomputed array from HBM. Flops are nearly free when the
       kernel waits on memory. Verify with the estimate that the kernel stays memory-bound
       after the change.""",
    ),
    _s(
        "single-hbm-pass",
        "one pass over the input",
        """
       Read each input from HBM once: compute all the statistics the output needs in the same
       pass (for example sum and sum of squares together), and avoid chains of pallas_calls
       that write an intermediate array only to read it back. Where two passes are unavoidable,
       keep the intermediate in bf16 or as per-row statistics, not as a full f32 copy.""",
    ),
)

_BY_NAME = {s.name: s for s in STRATEGIES}

# The strategies that move a kernel's estimate most for what bounds it (perf.analysis.Bound),
# tried first, in this order; the rest follow in library order.
FOR_BOUND: dict[Bound, tuple[str, ...]] = {
    # cheaper MXU passes, fewer accumulator round trips over K, then a narrower N block: shorter
    # first and last steps, whose copies the pipeline cannot hide
    Bound.COMPUTE: (
        "bf16-operands",
        "whole-k",
        "shrink-col-blocks",
        "grow-depth-blocks",
        "grow-row-blocks",
        "square-output-tiles",
    ),
    # bytes: no intermediate through HBM, fewer re-reads of each operand, copies hidden
    Bound.MEMORY: (
        "fuse-rowwise-epilogue",
        "single-hbm-pass",
        "grow-row-blocks",
        "grow-col-blocks",
        "square-output-tiles",
        "whole-k",
        "deeper-pipeline",
    ),
    # the fixed cost per grid step: fewer, larger steps
    Bound.OVERHEAD: (
        "fewer-grid-steps",
        "grow-row-blocks",
        "grow-col-blocks",
        "grow-depth-blocks",
        "whole-k",
    ),
}


def for_bound(strategies: list[Strategy], bound: str) -> list[Strategy]:
    """`strategies` with those that matter most for `bound` first (FOR_BOUND's order), then the
    rest in their own order; unchanged when the bound is unknown ("")."""
    first = FOR_BOUND.get(Bound(bound), ()) if bound in tuple(Bound) else ()
    rank = {name: i for i, name in enumerate(first)}
    return sorted(strategies, key=lambda s: rank.get(s.name, len(first)))


def strategy(name: str) -> Strategy:
    """The strategy called `name`."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown strategy {name!r}; known: {', '.join(_BY_NAME)}") from None


def applicable(family: str) -> list[Strategy]:
    """The strategies worth trying on a task of `family`, in library order. An unknown family
    gets only the strategies that apply to every family."""
    return [s for s in STRATEGIES if s.applies(family)]
