"""The JSON of every type the codec carries is byte for byte what its hand-written `to_json`
wrote before the codec (each literal below was made by the old methods), and reads back as the
object it was made from."""

import json

import pytest

from maxkernel_tui.agents.builtin.reply import Failure as ReplyFailure
from maxkernel_tui.agents.builtin.reply import WorkerReply
from maxkernel_tui.agents.llm.transcript import fingerprint
from maxkernel_tui.agents.llm.types import Message, Request, Speaker, ToolCall
from maxkernel_tui.agents.orchestration.limits import LoopLimits
from maxkernel_tui.agents.roles.context import Failure, TurnedDown
from maxkernel_tui.agents.roles.parsers import EdgeCase
from maxkernel_tui.agents.search.config import SearchConfig, StoredSearch
from maxkernel_tui.agents.tools.assignment import RoleAssignment, RolePlan
from maxkernel_tui.agents.tools.specs import ToolName
from maxkernel_tui.commands.bench import BenchRow
from maxkernel_tui.kernels.description import (
    ConfigShapes,
    DidNotFit,
    TaskDescription,
    TensorSpec,
    XlaCost,
)
from maxkernel_tui.kernels.edge_configs import EdgeRequest
from maxkernel_tui.kernels.evaluation.protocol import (
    CandidateRequest,
    DeviceNumerics,
    Done,
    NumericsRun,
    ProbeStage,
    ProductionRequest,
    ReferenceAnswer,
    ReferenceRequest,
    TilesRequest,
    TilesRun,
    TimingAnswer,
    TimingRequest,
    TimingSamples,
    Traced,
    TraceRequest,
    WorkerProblem,
    event_from_json,
    event_to_json,
    request_from_json,
    request_to_json,
)
from maxkernel_tui.kernels.fork_server import ForkRequest, ServerEvent, ServerMessage
from maxkernel_tui.kernels.importers.calibration import RoundingSpread
from maxkernel_tui.kernels.perf.analysis import (
    Block,
    Bound,
    KernelAnalysis,
    MemorySpace,
    ProfileAnswer,
    ProfileRequest,
    ReferenceCost,
    Trace,
    TraceEvent,
)
from maxkernel_tui.kernels.perf.calibration import CalibrationRecord, KernelFeatures, ModelPoint
from maxkernel_tui.kernels.perf.device_trace import DmaShare
from maxkernel_tui.kernels.perf.model import Estimate
from maxkernel_tui.kernels.perf.summary import ProfileSummary
from maxkernel_tui.kernels.perf.vs_xla import VsXla, XlaBaseline, XlaFigure
from maxkernel_tui.kernels.report.basis import Basis, Clock
from maxkernel_tui.kernels.report.checks import FAIL, Check, Timing
from maxkernel_tui.kernels.report.expert import ExpertComparison
from maxkernel_tui.kernels.report.reasons import Reason, Said
from maxkernel_tui.kernels.report.status import Verdict

feat = KernelFeatures("memory", 8, 1 << 20, 2.5e9, 4096)
block = Block("input 0", [128, 256], [1024, 256], "bfloat16", "vmem", 65536, 8)
ka = KernelAnalysis(
    "k",
    [8],
    ["parallel"],
    [block],
    0,
    131072,
    None,
    1 << 20,
    8,
    1e6,
    0.0,
    2e3,
    0.0,
    [[128, 256, 128]],
    False,
    5.0,
)
trace = Trace(
    "/t",
    "bench",
    "measured on TPU (device trace)",
    0.5,
    [TraceEvent("fusion", 1.25)],
    DmaShare(0.25, 0.75, 1e-3, 3),
)
est = Estimate(
    "v5e",
    "estimated",
    1e-3,
    "memory",
    9e-4,
    2e-4,
    1e-5,
    1 << 20,
    2e9,
    4096,
    1 << 24,
    True,
    5e-4,
    0.5,
    2e-3,
    2.0,
    vs_xla=VsXla(
        XlaFigure(XlaBaseline.AS_WRITTEN, 1, 2.0, Basis.ESTIMATED, "v5e"),
        XlaFigure(XlaBaseline.TOLERANCE, 3, 5.5, Basis.ESTIMATED, "v5e"),
    ),
)
costs = {"v5e": ReferenceCost(1e9, 2e6, None), "v6e": ReferenceCost(error="did not fit")}
expert = ExpertComparison("measured", "TPU v5 lite", "optimized.py", 1e-3, 9e-4, 0.9, (0.85, 0.95))
timing = Timing(
    "kernel", "measured", "TPU v5 lite", "1.0 ms", median_s=1e-3, ci95=(9e-4, 1.1e-3), samples=20
)

OBJECTS = {
    "CandidateRequest": CandidateRequest(
        "/w/k.py",
        "/s/12p",
        "v5e",
        "bench",
        [("check", 7), ("heldout", 9)],
        "/w",
        {"edge": {"b": 1}},
        True,
        False,
        True,
        True,
        "numerics",
        TilesRequest(1, 2, 3, ["/i.npy"]),
        "d",
        {"bench": "/p"},
        {"check": "why"},
    ),
    "CandidateRequest_min": CandidateRequest("/w/k.py", "/s/12p", "v5e", "bench", [], "/w"),
    "TraceRequest": TraceRequest("/w/k.py", "/s", ["bench"], "/w", {"e": {"b": 1}}, "dg"),
    "NumericsRun": NumericsRun("check", 7, ["/a.npy"], None, False, 0.25, ["/i.npy"], True),
    "TilesRun": TilesRun(
        "bench",
        1,
        2,
        ["/v.npy"],
        ["/i.npy"],
        ["k"],
        3,
        9,
        unsampleable="why",
        seconds=1.5,
        shapes=[[2, 3]],
        classes=4,
    ),
    "ReferenceRequest": ReferenceRequest(
        "/s", [("check", 1)], "/o", {"e": {"x": 2}}, ProductionRequest("bench", 3, ["/i"], ["/x"])
    ),
    "ReferenceAnswer": ReferenceAnswer([NumericsRun("check", 1, files=["/r"])]),
    "ReferenceAnswer_error": ReferenceAnswer(error="no task"),
    "TimingRequest": TimingRequest("/p", "/s", "bench", 10, 2, None),
    "TimingAnswer": TimingAnswer(
        "TPU v5 lite",
        "tpu",
        TimingSamples([1e-3, float("inf")], [2e-3], []),
        "device trace",
        "",
        DeviceNumerics(True, "bench"),
        ModelPoint("v5e", 1e-3, feat),
    ),
    "TimingAnswer_min": TimingAnswer("cpu", "cpu", TimingSamples([1.0], [2.0])),
    "KernelAnalysis": ka,
    "ReferenceCost": costs["v5e"],
    "ReferenceCost_error": costs["v6e"],
    "Trace": trace,
    "ProfileRequest": ProfileRequest({"bench": "/p"}, "/s", ["v5e"], "/t", False, costs),
    "ProfileAnswer": ProfileAnswer("bench", [ka], costs, 1024, trace),
    "ProfileAnswer_min": ProfileAnswer("bench", [], {}),
    "Estimate": est,
    "ProfileSummary": ProfileSummary(
        "12p",
        "/k.py",
        "bench",
        [],
        [],
        {"v5e": ["w"]},
        costs,
        None,
        ["p"],
        {"v5e": 2},
        "optimized.py",
        [],
    ),
    "ModelPoint": ModelPoint("v5e", 1e-3, feat),
    "CalibrationRecord": CalibrationRecord(
        "k", "t", "v5e", "TPU v5 lite", 1e-3, 2e-3, "device trace", feat, "0.4", None, 12.5
    ),
    "TensorSpec": TensorSpec([2, 3], "float32"),
    "ConfigShapes": ConfigShapes(
        [TensorSpec([2], "f32")], [1, "x", None], [TensorSpec([2], "f32")], 0.5, None
    ),
    "XlaCost": XlaCost("bench", "v5e", 1.5, 1e9, None, 2e-3, [DidNotFit("v4", "oom")], None),
    "XlaCost_error": XlaCost(error="boom"),
    "TaskDescription": TaskDescription(
        "/s/12p",
        3,
        "12p",
        {"bench": ConfigShapes([], [], [])},
        XlaCost("bench"),
        None,
        1e9,
        [["a", "b"]],
    ),
    "TaskDescription_min": TaskDescription("/s/x", 3, None, {}, None, None, None, []),
    "TaskDescription_error": TaskDescription("/s/x", 3, "x", {}, None, "cannot load"),
    "ExpertComparison": expert,
    "ExpertComparison_est": ExpertComparison("estimated", "v5e (model)", "e.py", 1.0, 2.0, 2.0),
    "ForkRequest": ForkRequest("m", ["a"], {"K": "V"}, "/c"),
    "ServerMessage": ServerMessage("exited", 12, -9),
    "SearchConfig": SearchConfig("evolve", max_evals=5),
    "StoredSearch": StoredSearch(SearchConfig(), "seed text"),
    "Failure": Failure("numerics", "bad"),
    "TurnedDown": TurnedDown("code", "repeat"),
    "BenchRow": BenchRow(
        "k", "12p", "/k.py", Verdict.ACCEPTED, None, "", [timing], 1.5, expert, "node-1", "verified"
    ),
    "BenchRow_min": BenchRow("k", "12p", "/k.py", Verdict.REJECTED, "numerics", "bad", [], 1.0),
    "RoundingSpread": RoundingSpread({0.01: 0.5, 0.02: 0.25}, ("check", "bench"), None),
    "RoundingSpread_error": RoundingSpread(error="failed"),
    "EdgeRequest": EdgeRequest("/s", "edge_small", {"b": 1, "t": [1, 2]}, 30.0),
    "RolePlan": RolePlan(
        {
            "coder": RoleAssignment("m", (ToolName.LOWER, ToolName.KNOWLEDGE), 4),
            "tester": RoleAssignment(None, (), 2),
        }
    ),
    "LoopLimits": LoopLimits(target_score=1.5),
    "WorkerReply_text": WorkerReply("hello"),
    "WorkerReply_error": WorkerReply(None, "no", ReplyFailure.CANNOT_PLAN),
    "WorkerReply_internal": WorkerReply(None, "x", None),
    "EdgeCase": EdgeCase("edge_a", {"b": 1}, "small"),
}
EVENTS = {
    "ev_check": Check("tpu_lower", FAIL, Reason.LOWERING_FAILED, Said("Mosaic: no"), 0.5),
    "ev_run": NumericsRun("heldout", 9, error="ValueError"),
    "ev_tiles": TilesRun("bench", 1, 2),
    "ev_traced": Traced("check", "/p.bin", 0.25),
    "ev_usage": WorkerProblem("x", usage=True),
    "ev_error": WorkerProblem("tb"),
    "ev_done": Done(),
}


OBJECTS |= {name: EVENTS[name] for name in EVENTS}
OBJECTS |= {"req_trace": OBJECTS["TraceRequest"], "req_judge": OBJECTS["CandidateRequest"]}

# (the module that declares the type, the object, its JSON as the old method wrote it)
WRITTEN = [
    (
        "kernels/evaluation/protocol.py",
        "CandidateRequest",
        {
            "kernel": "/w/k.py",
            "task": "/s/12p",
            "target": "v5e",
            "bench_config": "bench",
            "runs": [["check", 7], ["heldout", 9]],
            "out_dir": "/w",
            "extra_configs": {"edge": {"b": 1}},
            "detect_races": True,
            "require_pallas": False,
            "expert_baseline": True,
            "edges_only": True,
            "probe": "numerics",
            "tiles": {"input_seed": 1, "sample_seed": 2, "random_blocks": 3, "inputs": ["/i.npy"]},
            "task_digest": "d",
            "programs": {"bench": "/p"},
            "untraced": {"check": "why"},
        },
    ),
    (
        "kernels/evaluation/protocol.py",
        "CandidateRequest_min",
        {
            "kernel": "/w/k.py",
            "task": "/s/12p",
            "target": "v5e",
            "bench_config": "bench",
            "runs": [],
            "out_dir": "/w",
            "extra_configs": {},
            "detect_races": False,
            "require_pallas": True,
            "expert_baseline": False,
            "edges_only": False,
            "probe": "",
            "tiles": None,
            "task_digest": "",
            "programs": {},
            "untraced": {},
        },
    ),
    (
        "kernels/evaluation/protocol.py",
        "TimingAnswer",
        {
            "device": "TPU v5 lite",
            "platform": "tpu",
            "samples": {"candidate": [0.001, float("inf")], "reference": [0.002], "expert": []},
            "clock": "device trace",
            "clock_note": "",
            "numerics": {
                "ok": True,
                "config": "bench",
                "output": 0,
                "comparison": None,
                "outputs": 0,
                "expected": 0,
            },
            "model": {
                "target": "v5e",
                "estimated_s": 0.001,
                "features": {
                    "bound": "memory",
                    "steps": 8,
                    "hbm_bytes": 1048576,
                    "flops": 2500000000.0,
                    "vmem_bytes": 4096,
                },
            },
        },
    ),
    (
        "kernels/evaluation/protocol.py",
        "TimingAnswer_min",
        {
            "device": "cpu",
            "platform": "cpu",
            "samples": {"candidate": [1.0], "reference": [2.0], "expert": []},
            "clock": "wall clock",
            "clock_note": "",
            "numerics": None,
            "model": None,
        },
    ),
    (
        "kernels/evaluation/protocol.py",
        "ReferenceRequest",
        {
            "task": "/s",
            "runs": [["check", 1]],
            "out_dir": "/o",
            "extra_configs": {"e": {"x": 2}},
            "production": {"config": "bench", "seed": 3, "inputs": ["/i"], "indices": ["/x"]},
        },
    ),
    (
        "kernels/evaluation/protocol.py",
        "ReferenceAnswer",
        {
            "runs": [
                {
                    "config": "check",
                    "seed": 1,
                    "files": ["/r"],
                    "error": None,
                    "races": None,
                    "seconds": 0.0,
                    "inputs": None,
                    "at_indices": None,
                }
            ]
        },
    ),
    ("kernels/evaluation/protocol.py", "ReferenceAnswer_error", {"error": "no task"}),
    (
        "kernels/evaluation/protocol.py",
        "TilesRun",
        {
            "config": "bench",
            "input_seed": 1,
            "sample_seed": 2,
            "values": ["/v.npy"],
            "indices": ["/i.npy"],
            "kernels": ["k"],
            "blocks": 3,
            "of_blocks": 9,
            "error": None,
            "fault": None,
            "unsampleable": "why",
            "seconds": 1.5,
            "shapes": [[2, 3]],
            "classes": 4,
        },
    ),
    (
        "kernels/evaluation/protocol.py",
        "req_trace",
        {
            "trace": {
                "kernel": "/w/k.py",
                "task": "/s",
                "configs": ["bench"],
                "out_dir": "/w",
                "extra_configs": {"e": {"b": 1}},
                "task_digest": "dg",
            }
        },
    ),
    (
        "kernels/evaluation/protocol.py",
        "ev_check",
        {
            "check": {
                "name": "tpu_lower",
                "status": "fail",
                "reason": "lowering_failed",
                "detail": "cannot be lowered for TPU at production shapes: Mosaic: no",
                "seconds": 0.5,
                "data": {"type": "Said", "text": "Mosaic: no"},
            }
        },
    ),
    ("kernels/evaluation/protocol.py", "ev_usage", {"usage_error": {"detail": "x"}}),
    ("kernels/evaluation/protocol.py", "ev_error", {"error": {"detail": "tb"}}),
    ("kernels/evaluation/protocol.py", "ev_done", {"done": {}}),
    (
        "kernels/perf/analysis.py",
        "ProfileAnswer",
        {
            "config": "bench",
            "kernels": [
                {
                    "name": "k",
                    "grid": [8],
                    "dimension_semantics": ["parallel"],
                    "blocks": [
                        {
                            "role": "input 0",
                            "shape": [128, 256],
                            "array_shape": [1024, 256],
                            "dtype": "bfloat16",
                            "memory_space": "vmem",
                            "bytes": 65536,
                            "fetches": 8,
                        }
                    ],
                    "scalar_prefetch": 0,
                    "vmem_bytes": 131072,
                    "vmem_limit_bytes": None,
                    "hbm_bytes": 1048576,
                    "steps": 8,
                    "mxu_flops_per_step": 1000000.0,
                    "mxu_f32_flops_per_step": 0.0,
                    "vector_ops_per_step": 2000.0,
                    "transcendentals_per_step": 0.0,
                    "matmul_dims": [[128, 256, 128]],
                    "index_maps_exact": False,
                    "mxu_highest_flops_per_step": 5.0,
                    "dma_starts_per_step": 0.0,
                }
            ],
            "reference_costs": {
                "v5e": {
                    "flops": 1000000000.0,
                    "bytes_accessed": 2000000.0,
                    "optimal_seconds": None,
                    "transcendentals": None,
                    "matmuls": None,
                },
                "v6e": {"error": "did not fit"},
            },
            "io_bytes": 1024,
            "trace": {
                "dir": "/t",
                "config": "bench",
                "kind": "measured on TPU (device trace)",
                "wall_seconds": 0.5,
                "top_events": [{"name": "fusion", "milliseconds": 1.25}],
                "dma": {"dma_wait": 0.25, "compute": 0.75, "device_seconds": 0.001, "runs": 3},
            },
            "written_passes": 1,
            "tolerance_passes": None,
        },
    ),
    (
        "kernels/perf/analysis.py",
        "ProfileRequest",
        {
            "programs": {"bench": "/p"},
            "task": "/s",
            "targets": ["v5e"],
            "trace_dir": "/t",
            "trace": False,
            "reference_costs": {
                "v5e": {
                    "flops": 1000000000.0,
                    "bytes_accessed": 2000000.0,
                    "optimal_seconds": None,
                    "transcendentals": None,
                    "matmuls": None,
                },
                "v6e": {"error": "did not fit"},
            },
            "tolerance_passes": None,
        },
    ),
    (
        "kernels/perf/analysis.py",
        "ReferenceCost",
        {
            "flops": 1000000000.0,
            "bytes_accessed": 2000000.0,
            "optimal_seconds": None,
            "transcendentals": None,
            "matmuls": None,
        },
    ),
    ("kernels/perf/analysis.py", "ReferenceCost_error", {"error": "did not fit"}),
    (
        "kernels/perf/summary.py",
        "ProfileSummary",
        {
            "task": "12p",
            "kernel": "/k.py",
            "config": "bench",
            "kernels": [],
            "estimates": [],
            "warnings": {"v5e": ["w"]},
            "reference_costs": {
                "v5e": {
                    "flops": 1000000000.0,
                    "bytes_accessed": 2000000.0,
                    "optimal_seconds": None,
                    "transcendentals": None,
                    "matmuls": None,
                    "kind": "estimated",
                    "source": "XLA cost analysis, AOT compile for v5e",
                },
                "v6e": {
                    "error": "did not fit",
                    "kind": "estimated",
                    "source": "XLA cost analysis, AOT compile for v6e",
                },
            },
            "trace": None,
            "problems": ["p"],
            "calibration": {"v5e": 2},
            "expert": "optimized.py",
            "expert_estimates": [],
        },
    ),
    (
        "kernels/perf/model.py",
        "Estimate",
        {
            "target": "v5e",
            "kind": "estimated",
            "seconds": 0.001,
            "bound": "memory",
            "transfer_seconds": 0.0009,
            "compute_seconds": 0.0002,
            "overhead_seconds": 1e-05,
            "hbm_bytes": 1048576,
            "flops": 2000000000.0,
            "vmem_bytes": 4096,
            "vmem_capacity": 16777216,
            "fits_vmem": True,
            "roofline_seconds": 0.0005,
            "roofline_share": 0.5,
            "reference_seconds": 0.002,
            "speedup": 2.0,
            "dispatch_seconds": 0.0001,
            "reference_precision": "XLA at its default precision (one bf16 MXU pass)",
            "vs_xla": {
                "as_written": {
                    "baseline": "as-written",
                    "passes": 1,
                    "speedup": 2.0,
                    "basis": "estimated",
                    "where": "v5e",
                },
                "tolerance": {
                    "baseline": "tolerance",
                    "passes": 3,
                    "speedup": 5.5,
                    "basis": "estimated",
                    "where": "v5e",
                },
            },
        },
    ),
    (
        "kernels/perf/calibration.py",
        "ModelPoint",
        {
            "target": "v5e",
            "estimated_s": 0.001,
            "features": {
                "bound": "memory",
                "steps": 8,
                "hbm_bytes": 1048576,
                "flops": 2500000000.0,
                "vmem_bytes": 4096,
            },
        },
    ),
    (
        "kernels/perf/calibration.py",
        "CalibrationRecord",
        {
            "kernel": "k",
            "task": "t",
            "target": "v5e",
            "device": "TPU v5 lite",
            "estimated_s": 0.001,
            "measured_s": 0.002,
            "clock": "device trace",
            "features": {
                "bound": "memory",
                "steps": 8,
                "hbm_bytes": 1048576,
                "flops": 2500000000.0,
                "vmem_bytes": 4096,
            },
            "jax_version": "0.4",
            "libtpu_version": None,
            "recorded_at": 12.5,
        },
    ),
    (
        "kernels/description.py",
        "TaskDescription",
        {
            "folder": "/s/12p",
            "format": 3,
            "task_id": "12p",
            "configs": {"bench": {"inputs": [], "static": [], "outputs": []}},
            "cost": {
                "config": "bench",
                "target": None,
                "compile_seconds": None,
                "flops": None,
                "bytes_accessed": None,
                "optimal_seconds": None,
                "did_not_fit": [],
                "libtpu": None,
                "transcendentals": None,
            },
            "declared_flops": 1000000000.0,
            "tie_groups": [["a", "b"]],
        },
    ),
    (
        "kernels/description.py",
        "TaskDescription_min",
        {"folder": "/s/x", "format": 3, "configs": {}},
    ),
    (
        "kernels/description.py",
        "TaskDescription_error",
        {"folder": "/s/x", "format": 3, "task_id": "x", "error": "cannot load"},
    ),
    (
        "kernels/description.py",
        "ConfigShapes",
        {
            "inputs": [{"shape": [2], "dtype": "f32"}],
            "static": [1, "x", None],
            "outputs": [{"shape": [2], "dtype": "f32"}],
            "reference_seconds": 0.5,
        },
    ),
    (
        "kernels/description.py",
        "XlaCost",
        {
            "config": "bench",
            "target": "v5e",
            "compile_seconds": 1.5,
            "flops": 1000000000.0,
            "bytes_accessed": None,
            "optimal_seconds": 0.002,
            "did_not_fit": [{"target": "v4", "reason": "oom"}],
            "libtpu": None,
            "transcendentals": None,
        },
    ),
    ("kernels/description.py", "XlaCost_error", {"error": "boom"}),
    (
        "kernels/report/expert.py",
        "ExpertComparison",
        {
            "kind": "measured",
            "where": "TPU v5 lite",
            "expert": "optimized.py",
            "kernel_s": 0.001,
            "expert_s": 0.0009,
            "ratio": 0.9,
            "ci95": [0.85, 0.95],
        },
    ),
    (
        "kernels/report/expert.py",
        "ExpertComparison_est",
        {
            "kind": "estimated",
            "where": "v5e (model)",
            "expert": "e.py",
            "kernel_s": 1.0,
            "expert_s": 2.0,
            "ratio": 2.0,
            "ci95": None,
        },
    ),
    (
        "kernels/fork_server.py",
        "ForkRequest",
        {"module": "m", "args": ["a"], "env": {"K": "V"}, "cwd": "/c"},
    ),
    (
        "kernels/fork_server.py",
        "ServerMessage",
        {"kind": "exited", "pid": 12, "code": -9, "error": ""},
    ),
    (
        "kernels/importers/calibration.py",
        "RoundingSpread",
        {"used": [[0.01, 0.5], [0.02, 0.25]], "configs": ["check", "bench"], "error": None},
    ),
    (
        "kernels/importers/calibration.py",
        "RoundingSpread_error",
        {"used": [], "configs": [], "error": "failed"},
    ),
    (
        "kernels/edge_configs.py",
        "EdgeRequest",
        {"task": "/s", "name": "edge_small", "params": {"b": 1, "t": [1, 2]}, "time_limit": 30.0},
    ),
    (
        "agents/search/config.py",
        "StoredSearch",
        {
            "config": {
                "algorithm": "beam",
                "width": 3,
                "depth": 3,
                "branches": 2,
                "population": 6,
                "islands": 2,
                "max_evals": None,
                "regression_tolerance": 0.0,
                "headroom_floor": 0.95,
                "llm_concurrency": 2,
                "eval_concurrency": 1,
                "debug_attempts": 1,
                "rank_by": "tolerance",
            },
            "seed": "seed text",
        },
    ),
    (
        "agents/search/config.py",
        "SearchConfig",
        {
            "algorithm": "evolve",
            "width": 3,
            "depth": 3,
            "branches": 2,
            "population": 6,
            "islands": 2,
            "max_evals": 5,
            "regression_tolerance": 0.0,
            "headroom_floor": 0.95,
            "llm_concurrency": 2,
            "eval_concurrency": 1,
            "debug_attempts": 1,
            "rank_by": "tolerance",
        },
    ),
    ("agents/roles/context.py", "Failure", {"check": "numerics", "detail": "bad"}),
    ("agents/roles/context.py", "TurnedDown", {"content": "code", "reason": "repeat"}),
    (
        "commands/bench.py",
        "BenchRow",
        {
            "key": "k",
            "task": "12p",
            "kernel": "/k.py",
            "verdict": "accepted",
            "failed_check": None,
            "detail": "",
            "timings": [
                {
                    "what": "kernel",
                    "kind": "measured",
                    "device": "TPU v5 lite",
                    "label": "1.0 ms",
                    "median_s": 0.001,
                    "ci95": [0.0009, 0.0011],
                    "samples": 20,
                }
            ],
            "seconds": 1.5,
            "expert": {
                "kind": "measured",
                "where": "TPU v5 lite",
                "expert": "optimized.py",
                "kernel_s": 0.001,
                "expert_s": 0.0009,
                "ratio": 0.9,
                "ci95": [0.85, 0.95],
            },
            "executor_node": "node-1",
            "scope": "verified",
        },
    ),
    (
        "commands/bench.py",
        "BenchRow_min",
        {
            "key": "k",
            "task": "12p",
            "kernel": "/k.py",
            "verdict": "rejected",
            "failed_check": "numerics",
            "detail": "bad",
            "timings": [],
            "seconds": 1.0,
            "expert": None,
            "executor_node": "local",
            "scope": "",
        },
    ),
    (
        "agents/tools/assignment.py",
        "RolePlan",
        {
            "coder": {"model": "m", "tools": ["lower", "knowledge"], "max_tool_calls": 4},
            "tester": {"model": None, "tools": [], "max_tool_calls": 2},
        },
    ),
    (
        "agents/orchestration/limits.py",
        "LoopLimits",
        {
            "max_iterations": 3,
            "max_debug_attempts": 3,
            "max_repeats": 3,
            "patience": 2,
            "min_improvement": 0.02,
            "target_score": 1.5,
            "tune_candidates": 6,
            "tune_evaluations": 1,
            "edge_cases": True,
            "rank_by": "tolerance",
        },
    ),
    ("agents/builtin/reply.py", "WorkerReply_text", {"text": "hello"}),
    ("agents/builtin/reply.py", "WorkerReply_error", {"error": "no", "kind": "cannot_plan"}),
    ("agents/builtin/reply.py", "WorkerReply_internal", {"error": "x", "kind": None}),
    ("agents/roles/parsers.py", "EdgeCase", {"name": "edge_a", "params": {"b": 1}, "why": "small"}),
]


def written(name, obj):
    if name.startswith("ev_"):
        return event_to_json(obj)
    if name.startswith("req_"):
        return request_to_json(obj)
    return obj.to_json()


def read(name, data):
    if name.startswith("ev_"):
        return event_from_json(data)
    if name.startswith("req_"):
        return request_from_json(data)
    return type(OBJECTS[name]).from_json(data)


@pytest.mark.parametrize(
    ("module", "name", "expected"), WRITTEN, ids=[f"{m}:{n}" for m, n, _ in WRITTEN]
)
def test_the_json_is_what_the_old_method_wrote_and_reads_back(module, name, expected):
    obj = OBJECTS[name]
    text = json.dumps(written(name, obj))
    assert text == json.dumps(expected)
    assert read(name, json.loads(text)) == obj


def test_vocabularies_read_back_as_their_enums():
    """Fields whose vocabulary is an enum hold its members once read, not the JSON's strings."""
    read_back = {
        name: read(name, json.loads(json.dumps(written(name, o)))) for name, o in OBJECTS.items()
    }
    found = [
        (read_back["Estimate"].kind, Basis.ESTIMATED),
        (read_back["Estimate"].bound, Bound.MEMORY),
        (read_back["ExpertComparison"].kind, Basis.MEASURED),
        (read_back["BenchRow"].timings[0].kind, Basis.MEASURED),
        (read_back["KernelAnalysis"].blocks[0].memory_space, MemorySpace.VMEM),
        (read_back["TimingAnswer"].clock, Clock.DEVICE_TRACE),
        (read_back["CalibrationRecord"].clock, Clock.DEVICE_TRACE),
        (read_back["CalibrationRecord"].features.bound, Bound.MEMORY),
        (read_back["CandidateRequest"].probe, ProbeStage.NUMERICS),
        (read_back["CandidateRequest_min"].probe, ProbeStage.NONE),
        (read_back["ServerMessage"].kind, ServerEvent.EXITED),
    ]
    assert [(type(value), value) for value, _ in found] == [(type(m), m) for _, m in found]


def test_a_request_is_fingerprinted_as_when_roles_were_strings():
    """A recorded transcript (agents/llm/replay.py) is found by the fingerprint of its request,
    made from its JSON: the speakers' members write their old strings."""
    call = ToolCall("c", "f", {})
    request = Request(
        (
            Message(Speaker.USER, "hi"),
            Message(Speaker.ASSISTANT, "", (call,)),
            Message(Speaker.TOOL, "r", tool_call_id="c", name="f"),
        )
    )
    assert fingerprint(request) == "07ac6815f8b3690a"
