"""A task read in place plans its held-out sizes with what tracing its reference told (which of
its coinciding sizes it ties), wherever it is loaded: in this process from the cache kept by the
digest of its files, in an evaluation's workers from the file beside the snapshot, on a Ray
node from the file shipped with the task. No jax here: the traced groups are given as the
describe worker answers them (test_in_place_ties.py traces them)."""

import json

import pytest

from maxkernel_tui.config import cache_dir
from maxkernel_tui.kernels.config_names import BENCH, CHECK, HELDOUT
from maxkernel_tui.kernels.derive.rules import derive_sizes
from maxkernel_tui.kernels.executors.jobs import TaskFiles
from maxkernel_tui.kernels.listing import derivation_record
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.snapshot import snapshot_task
from maxkernel_tui.kernels.traced_ties import TIES_FILE, remember
from tests.support.maxkernel_styles import write_styled
from tests.support.task_folders import write_plain

M_EQ_N = "gemm_bias_m_eq_n"  # batch = d_out = 2048, d_in = 1024
APART = (("batch",), ("d_out",))  # what tracing answers for it: batch and d_out are free
PLAIN_41K_APART = (("batch_size",), ("out_features",))  # x @ w + b ties neither to the other


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("MAXKERNEL_TUI_CACHE_DIR", str(root))
    return root


def test_literal_sizes_are_one_per_occurrence_and_move_together_until_traced(tmp_path):
    task = load_task(write_styled(tmp_path, M_EQ_N, "literal"))
    sizes = task.derivation.sizes
    assert list(sizes[BENCH]) == ["dim_2048", "dim_1024", "dim_1024_2", "dim_2048_2", "dim_2048_3"]
    for config in (CHECK, HELDOUT):  # the static plan: every size of a value alike
        assert len({v for k, v in sizes[config].items() if k.startswith("dim_2048")}) == 1


def test_a_traced_task_plans_coinciding_sizes_apart_and_an_edited_one_forgets(tmp_path, cache):
    folder = write_styled(tmp_path, M_EQ_N, "named")
    static = load_task(folder)
    assert static.derivation.sizes[HELDOUT]["batch"] == static.derivation.sizes[HELDOUT]["d_out"]
    remember(static, APART, cache)
    traced = load_task(folder, cache=cache).derivation
    assert traced.groups == APART
    assert derivation_record(load_task(folder, cache=cache))["traced_groups"] == [
        ["batch"],
        ["d_out"],
    ]
    assert traced.sizes[HELDOUT]["batch"] != traced.sizes[HELDOUT]["d_out"]
    assert traced.sizes[CHECK] == static.derivation.sizes[CHECK]  # check does not move
    reference = folder / "reference.py"
    reference.write_text(reference.read_text() + "# edited\n")
    assert load_task(folder, cache=cache).derivation.groups == ()  # traced for other content


def test_tied_sizes_stay_together_while_coinciding_free_ones_part():
    production = {"rows": 1024, "cols": 1024, "scale_rows": 1024}
    shapes = (("rows", "cols"), ("scale_rows",))
    derived = derive_sizes(production, shapes, (), (("cols",), ("rows", "scale_rows")))
    held = derived.heldout
    assert held["rows"] == held["scale_rows"] != held["cols"]


def test_parting_keeps_a_group_count_dividing_and_the_shapes_within_budget():
    production = {"batch": 512, "channels": 512, "groups": 32}
    derived = derive_sizes(
        production, (("batch", "channels"), ("channels",)), (), (("batch",), ("channels",))
    )
    held = derived.heldout
    assert held["batch"] != held["channels"] and held["channels"] % held["groups"] == 0
    conv = {"batch": 64, "c_in": 64, "c_out": 128, "height": 128, "width": 128}
    shapes = (("batch", "c_in", "height", "width"), ("c_out", "c_in", 3, 3))
    groups = tuple((name,) for name in conv)
    held = derive_sizes(conv, shapes, (), groups).heldout
    assert len({held["c_out"], held["height"], held["width"]}) == 3
    assert held["batch"] * held["c_in"] * held["height"] * held["width"] <= 2**24


def test_a_snapshot_carries_the_plan_to_its_workers_and_never_a_planted_file(tmp_path, cache):
    folder = write_styled(tmp_path / "tasks", M_EQ_N, "named")
    static = load_task(folder)
    # planted in the task's own folder: claims d_in is free, for content it does not match
    (folder / TIES_FILE).write_text(json.dumps({"digest": "0" * 64, "groups": [["x"]]}))
    remember(static, APART, cache)
    (tmp_path / "snapshots").mkdir()
    snapshot = snapshot_task(static, tmp_path / "snapshots")  # the harness's task was static
    copied = json.loads((snapshot.task.folder / TIES_FILE).read_text())
    assert copied["groups"] == [list(g) for g in APART]
    in_worker = load_task(snapshot.task.folder).derivation
    in_this_process = load_task(folder, cache=cache).derivation
    assert in_worker.sizes == snapshot.task.derivation.sizes == in_this_process.sizes
    assert in_worker.sizes[HELDOUT]["batch"] != in_worker.sizes[HELDOUT]["d_out"]
    assert snapshot.change() is None  # the file beside the copy is not a change of the task


def test_a_task_shipped_to_a_node_carries_the_drivers_plan(tmp_path, cache):
    folder = write_styled(tmp_path / "tasks", M_EQ_N, "dict")
    remember(load_task(folder), APART, cache)
    driver = load_task(folder, cache=cache)
    written = TaskFiles.of(driver).write_under(tmp_path / "node")
    cache.rename(tmp_path / "elsewhere")  # the node has no cache of the driver's
    assert load_task(written).derivation.sizes == driver.derivation.sizes


@pytest.mark.parametrize("write", [write_plain, write_styled], ids=["maxkernel", "styled"])
def test_with_the_cache_under_home_a_worker_reads_only_the_file_beside_its_snapshot(
    tmp_path, monkeypatch, write
):
    """The default layout: the cache under the home directory, which every worker's sandbox
    refuses. A worker names no cache: it plans from the file beside a snapshot's copy, as the
    harness did, and from the static plan elsewhere, never by reading the user's cache."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("MAXKERNEL_TUI_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_dir().is_relative_to(home)
    if write is write_plain:  # MaxKernel's adapted format: batch = out_features = 256
        folder, apart = write_plain(tmp_path / "tasks", "41k_Gemm_Add_ReLU"), PLAIN_41K_APART
    else:
        folder, apart = write_styled(tmp_path / "tasks", M_EQ_N, "literal"), None
    static = load_task(folder)
    apart = apart or tuple((name,) for name in static.derivation.sizes[BENCH])
    remember(static, apart, cache_dir())  # what describing it leaves in the user's cache
    harness = load_task(folder, cache=cache_dir())  # the UI and CLI name the user's cache
    assert harness.derivation.groups == apart != static.derivation.groups
    assert load_task(folder).derivation == static.derivation  # no cache named: none read
    (tmp_path / "snapshots").mkdir()
    copy = snapshot_task(static, tmp_path / "snapshots").task.folder
    assert load_task(copy).derivation.sizes == harness.derivation.sizes
