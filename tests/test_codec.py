"""The codec (maxkernel_tui/codec.py): each kind of field it carries, the shapes a class gives
its JSON, what it refuses, and the report types of kernels/report/checks.py as they are."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import pytest

from maxkernel_tui.codec import (
    CodecError,
    JsonData,
    Shape,
    Tagged,
    Unknown,
    decode,
    encode,
)
from maxkernel_tui.kernels.evaluation.compare import compare_with_shares
from maxkernel_tui.kernels.report.checks import (
    FAIL,
    PASS,
    SKIP,
    TILES,
    Check,
    EvalReport,
    Timing,
)
from maxkernel_tui.kernels.report.expert import ExpertComparison
from maxkernel_tui.kernels.report.reasons import NoFigures, Reason, Said, TilesFigures
from maxkernel_tui.kernels.task import Tolerance
from maxkernel_tui.store import Store


def wire(data: Any) -> Any:
    return json.loads(json.dumps(data))


class Colour(StrEnum):
    RED = "red"
    BLUE = "blue"


class Size(Enum):
    SMALL = 1
    LARGE = 2


@dataclass(frozen=True)
class Leaf:
    name: str
    size: Size = Size.SMALL


@dataclass(frozen=True)
class Everything(JsonData):
    text: str
    count: int
    ratio: float
    flag: bool
    colour: Colour
    where: Path
    mode: Literal["a", "b"]
    pair: tuple[str, int]
    many: tuple[int, ...]
    items: list[Leaf]
    by_colour: dict[str, Colour]
    by_number: dict[int, Leaf]
    by_enum: dict[Colour, int]
    leaves: tuple[Leaf, ...] | None = None
    maybe: Leaf | None = None
    anything: Any = None


EVERYTHING = Everything(
    text="t",
    count=3,
    ratio=0.5,
    flag=True,
    colour=Colour.BLUE,
    where=Path("/tmp/x"),
    mode="b",
    pair=("check", 7),
    many=(1, 2, 3),
    items=[Leaf("a"), Leaf("b", Size.LARGE)],
    by_colour={"sky": Colour.BLUE},
    by_number={4: Leaf("four")},
    by_enum={Colour.RED: 1},
    leaves=(Leaf("x"), Leaf("y", Size.LARGE)),
    maybe=None,
    anything={"nested": (1, Colour.RED), "leaf": Leaf("z")},
)


def test_every_kind_of_field_goes_over_the_wire_and_back():
    data = wire(encode(EVERYTHING))
    assert data["colour"] == "blue" and data["where"] == "/tmp/x" and data["pair"] == ["check", 7]
    assert data["by_number"] == {"4": {"name": "four", "size": 1}}
    assert data["by_enum"] == {"red": 1} and data["by_colour"] == {"sky": "blue"}
    assert data["anything"] == {"nested": [1, "red"], "leaf": {"name": "z", "size": 1}}
    back = decode(Everything, data)
    assert back == EVERYTHING.__class__(**{**vars(EVERYTHING), "anything": data["anything"]})
    assert isinstance(back.pair, tuple) and isinstance(back.many, tuple)
    assert isinstance(back.leaves, tuple) and back.leaves[1].size is Size.LARGE
    assert back.by_colour["sky"] is Colour.BLUE and back.by_enum == {Colour.RED: 1}
    assert isinstance(back.where, Path) and list(back.by_number) == [4]


def test_a_nested_optional_tuple_of_dataclasses_and_a_missing_optional_field():
    data = wire(encode(EVERYTHING))
    del data["leaves"], data["maybe"], data["anything"]
    back = decode(Everything, data)
    assert back.leaves is None and back.maybe is None and back.anything is None
    data["leaves"] = [{"name": "only"}]  # its own missing field takes its default
    assert decode(Everything, data).leaves == (Leaf("only"),)


def test_floats_keep_infinity_and_nan_and_a_json_integer_becomes_a_float():
    @dataclass
    class Figures:
        values: list[float]
        one: float

    text = json.dumps(encode(Figures([math.inf, -math.inf, math.nan], 1.0)))
    assert text == '{"values": [Infinity, -Infinity, NaN], "one": 1.0}'
    back = decode(Figures, json.loads(text))
    assert back.values[0] == math.inf and math.isnan(back.values[2])
    assert type(decode(Figures, {"values": [], "one": 2}).one) is float


def test_an_unknown_key_is_an_error_unless_the_class_ignores_it():
    with pytest.raises(CodecError, match="unknown keys extra"):
        decode(Leaf, {"name": "a", "extra": 1})

    @dataclass
    class Lenient(JsonData, shape=Shape(unknown=Unknown.IGNORE)):
        name: str

    assert Lenient.from_json({"name": "a", "retired": 1}) == Lenient("a")


def test_a_missing_required_field_a_wrong_enum_and_a_short_pair_are_errors():
    with pytest.raises(CodecError, match="no 'name'"):
        decode(Leaf, {})
    with pytest.raises(CodecError, match="size"):
        decode(Leaf, {"name": "a", "size": 9})
    data = wire(encode(EVERYTHING))
    with pytest.raises(CodecError, match="pair"):
        decode(Everything, dict(data, pair=["check"]))
    with pytest.raises(CodecError, match="expected an object"):
        decode(Leaf, ["a"])


def test_null_for_a_field_that_cannot_be_none_reads_as_its_default():
    @dataclass
    class Defaults:
        data: dict[str, Any] = field(default_factory=dict)
        seed: str = ""
        maybe: str | None = "x"

    assert decode(Defaults, {"data": None, "seed": None, "maybe": None}) == Defaults(maybe=None)


@dataclass(frozen=True)
class Shaped(
    JsonData,
    shape=Shape(
        keys={"task_id": "task"},
        old_keys={"ci95": ("ci95_s",)},
        omit_none=("note",),
        omit_empty=("groups",),
        pairs=("used",),
        derived=("double",),
        derived_after="task_id",
    ),
):
    task_id: str
    note: str | None = None
    groups: list[list[str]] = field(default_factory=list)
    used: dict[float, float] = field(default_factory=dict)
    ci95: tuple[float, float] | None = None

    @property
    def double(self) -> str:
        return self.task_id * 2


def test_a_shape_renames_omits_pairs_derives_and_reads_an_older_key():
    plain = Shaped("t")
    assert json.dumps(plain.to_json()) == '{"task": "t", "double": "tt", "used": [], "ci95": null}'
    full = Shaped("t", "n", [["a"]], {0.01: 0.5}, (1.0, 2.0))
    data = wire(full.to_json())
    assert list(data) == ["task", "double", "note", "groups", "used", "ci95"]
    assert data["used"] == [[0.01, 0.5]]
    assert Shaped.from_json(data) == full
    older = {"task": "t", "ci95_s": [1, 2]}
    assert Shaped.from_json(older).ci95 == (1.0, 2.0)


def test_derived_properties_keep_their_place_when_the_field_before_them_is_left_out():
    @dataclass
    class Anchored(JsonData, shape=Shape(omit_none=True, derived=("twice",), derived_after="a")):
        a: int | None = None
        b: int = 1

        @property
        def twice(self) -> int:
            return self.b * 2

    assert list(Anchored().to_json()) == ["twice", "b"]
    assert list(Anchored(0).to_json()) == ["a", "twice", "b"]


@dataclass(frozen=True)
class Answer(JsonData, shape=Shape(alone="error", beside=("folder",), unknown=Unknown.IGNORE)):
    folder: str = ""
    runs: list[int] = field(default_factory=list)
    error: str | None = None


def test_an_error_is_written_alone_beside_the_fields_named_and_left_out_when_none():
    assert Answer("f", [1]).to_json() == {"folder": "f", "runs": [1]}
    assert Answer("f", [1], "boom").to_json() == {"folder": "f", "error": "boom"}
    assert Answer.from_json({"error": "boom"}) == Answer(error="boom")


@dataclass(frozen=True)
class Problem:
    detail: str
    usage: bool = False


@dataclass(frozen=True)
class End:
    pass


EVENTS: Tagged[Leaf | Problem | End] = Tagged(
    {
        "leaf": Leaf,
        "usage_error": (Problem, {"usage": True}),
        "error": (Problem, {"usage": False}),
        "done": End,
    }
)


def test_a_tagged_union_says_its_variant_by_its_key_and_a_tag_can_fix_fields():
    assert EVENTS.encode(Problem("x", usage=True)) == {"usage_error": {"detail": "x"}}
    assert EVENTS.encode(Problem("x")) == {"error": {"detail": "x"}}
    assert EVENTS.encode(End()) == {"done": {}}
    for event in (Leaf("a", Size.LARGE), Problem("x", True), Problem("y"), End()):
        assert EVENTS.decode(wire(EVENTS.encode(event))) == event
    with pytest.raises(CodecError, match="unknown tag 'nope'"):
        EVENTS.decode({"nope": {}})


def test_a_union_of_dataclasses_in_a_field_needs_its_tags():
    @dataclass
    class Untold:
        event: Leaf | Problem

    with pytest.raises(TypeError, match="cannot tell"):
        encode(Untold(Leaf("a")))

    @dataclass
    class Told:
        events: list[Annotated[Leaf | Problem | End, EVENTS]]

    told = Told([Leaf("a"), Problem("b", usage=True)])
    assert wire(encode(told)) == {
        "events": [{"leaf": {"name": "a", "size": 1}}, {"usage_error": {"detail": "b"}}]
    }
    assert decode(Told, wire(encode(told))) == told


def test_decode_reads_a_type_that_is_not_a_dataclass():
    data = {"a": [{"name": "x"}]}
    assert decode(dict[str, list[Leaf]], data) == {"a": [Leaf("x")]}
    assert decode(list[tuple[str, int]], [["a", 1]]) == [("a", 1)]


def test_a_shape_that_names_no_field_is_refused_when_first_used():
    @dataclass
    class Typo(JsonData, shape=Shape(omit_empty=("nmae",))):
        name: str

    with pytest.raises(TypeError, match="'nmae'"):
        Typo("a").to_json()


def a_report() -> EvalReport:
    report = EvalReport("12p", "/k.py", ["v5e"], "TPU v5 lite", seeds=[7], inputs=["numerics: x"])
    report.add(Check("static", PASS, Reason.STATIC_OK, NoFigures(), 0.1))
    report.add(Check(TILES, FAIL, Reason.LOWERING_FAILED, Said("no"), 1.5))
    report.add(Check("timing", SKIP, Reason.NO_TPU))
    report.timings.append(
        Timing("kernel", "measured", "TPU v5 lite", "1 ms", median_s=1e-3, ci95=(9e-4, 1e-3))
    )
    report.expert = ExpertComparison("measured", "TPU v5 lite", "e.py", 1e-3, 9e-4, 0.9)
    return report


def test_a_class_with_its_own_json_form_is_carried_by_it_inside_others():
    """Check keeps its own form (its words, and checks stored before reasons): a report's
    checks are written and read by it."""
    report = a_report()
    written = encode(report)
    assert written["checks"] == [c.to_json() for c in report.checks]
    assert written["checks"][1]["reason"] == "lowering_failed"
    again = decode(EvalReport, wire(written))
    assert again.checks == report.checks and again.timings == report.timings
    assert again.expert == report.expert and again.verdict == report.verdict


def test_reports_and_timings_keep_their_fields_and_read_older_forms():
    report = a_report()
    data = wire(report.to_json())
    assert list(data) == [
        "task", "kernel", "targets", "device", "verdict", "scope", "evidence",
        "checks", "timings", "seeds", "expert", "inputs", "executor_node",
    ]  # fmt: skip
    assert data["timings"] == [
        {
            "what": "kernel",
            "kind": "measured",
            "device": "TPU v5 lite",
            "label": "1 ms",
            "median_s": 1e-3,
            "ci95": [9e-4, 1e-3],
        }
    ]
    older = {"what": "kernel", "kind": "measured", "device": "d", "label": "l", "ci95_s": [1, 2]}
    assert decode(Timing, older).ci95 == (1.0, 2.0)
    without = {k: v for k, v in data.items() if k not in ("timings", "seeds", "executor_node")}
    assert decode(EvalReport, without).executor_node == "local"


def test_a_rejection_for_nan_outputs_is_stored_and_read_back(tmp_path):
    """A comparison that met NaN outputs (an unwritten block) is stored as it is said: the store
    refuses NaN, so its figures hold none (an agent's session ended on this error)."""
    nan_run = compare_with_shares(
        np.array([np.nan, 1.0], np.float32), np.ones(2, np.float32), Tolerance(0.01, 0.01)
    )[0]
    figures = TilesFigures("bench", 0, 1, 2, 8, comparison=nan_run, gradients="x")
    check = Check(TILES, FAIL, Reason.TILES_OUTSIDE_TOLERANCE, figures)
    report = EvalReport("1t", "/k.py", ["v5e"], "CPU (TPU interpret mode)", checks=[check])
    with Store(tmp_path / "sessions.db") as store:
        session = store.create_session("1t", "auto")
        version = store.add_kernel_version(session.id, "def computation(x): ...")
        stored = store.record_evaluation(version.id, report.to_json())
        back = EvalReport.from_json(store.evaluations(version.id)[0].report)
    assert stored.verdict == "rejected"
    [read] = back.checks
    assert read.figures.comparison.non_finite == 1
    assert read.detail == check.detail
