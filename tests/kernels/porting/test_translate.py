"""The PyTorch-module translator, offline: every operator family of KernelBench levels 1-2
translates from source alone, parameters become inputs with PyTorch's initialisation, and
what it cannot translate is named with its line. No jax, no torch."""

import ast
from pathlib import Path

import pytest

from maxkernel_tui.kernels.derive.plan import plan_derivation
from maxkernel_tui.kernels.derive.rules import shrunk_sizes
from maxkernel_tui.kernels.importers import ImportOptions
from maxkernel_tui.kernels.importers.torch_module import (
    BATCH_NORM_NOTE,
    DROPOUT_NOTE,
    SOURCE_COPY,
    TorchModuleImporter,
    mode_notes,
)
from maxkernel_tui.kernels.porting.torch_compare import (
    NOT_COMPARED,
    SMALLEST,
    comparison_sizes,
    torch_available,
)
from maxkernel_tui.kernels.porting.translate import translate_module
from maxkernel_tui.kernels.task import TaskImportError
from tests.support.paths import KERNELBENCH, TESTS

MODULES = sorted(p for p in KERNELBENCH.glob("*.py") if not p.stem.startswith("unsupported"))

# Every operator family the issue lists, and the module files that exercise it.
FAMILIES = {
    "linear": {"Linear"},
    "matmul/bmm": {"matmul", "bmm"},
    "conv 1d/2d/3d": {"Conv1d", "Conv2d", "Conv3d"},
    "transposed convs": {"ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"},
    "norms": {"BatchNorm", "InstanceNorm", "GroupNorm", "LayerNorm"},
    "activations": {
        "relu",
        "gelu",
        "silu",
        "mish",
        "tanh",
        "sigmoid",
        "hardswish",
        "Hardtanh",
        "LeakyReLU",
        "softplus",
        "elu",
        "selu",
        "SELU",
        "ELU",
        "Tanh",
        "relu6",
    },
    "softmax and log-sum-exp": {"Softmax", "logsumexp"},
    "reductions": {"sum", "mean", "max", "min", "amax"},
    "pooling": {"MaxPool2d", "MaxPool3d", "AvgPool3d", "avg_pool2d", "AdaptiveAvgPool2d"},
    "dropout": {"Dropout"},
    "clamp": {"clamp"},
}


def translated(path: Path):
    return translate_module(path.read_text(), path.stem)


def test_every_operator_family_is_translated_from_the_module_files():
    seen = {op for path in MODULES for op in translated(path).operators}
    missing = {family: ops - seen for family, ops in FAMILIES.items() if ops - seen}
    assert missing == {}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_each_module_becomes_a_plain_reference_that_parses(path):
    source = TorchModuleImporter().translate(path, path.read_text(), ImportOptions())
    tree = ast.parse(source.reference_py)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert set(functions) >= {"get_inputs", "computation"}
    assert "jax.random.key(0)" in source.reference_py
    assert ast.unparse(functions["get_inputs"].args) == "dtype=jnp.float32"
    assert "torch" not in ast.unparse(functions["computation"])
    assert source.extra_files[SOURCE_COPY] == path.read_text()


def test_production_sizes_are_integer_constants_inside_get_inputs():
    source = TorchModuleImporter().translate(
        KERNELBENCH / "gemm_relu_divide.py",
        (KERNELBENCH / "gemm_relu_divide.py").read_text(),
        ImportOptions(),
    )
    get_inputs = next(
        n
        for n in ast.parse(source.reference_py).body
        if isinstance(n, ast.FunctionDef) and n.name == "get_inputs"
    )
    constants = {
        s.targets[0].id: s.value.value
        for s in get_inputs.body
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant)
    }
    assert constants == {"batch_size": 256, "in_features": 512, "out_features": 256}
    assert get_inputs.body[-1].value.elts[1].elts == []  # no static arguments


def test_parameters_are_inputs_with_pytorchs_initialisation_and_norms_near_it():
    translation = translated(KERNELBENCH / "conv2d_groupnorm_tanh_hardswish.py")
    inputs = {t.name: t for t in translation.inputs}
    assert list(inputs) == [
        "x",
        "conv_weight",
        "conv_bias",
        "group_norm_weight",
        "group_norm_bias",
        "bias",
    ]
    assert inputs["conv_weight"].torch_path == "conv.weight"
    assert inputs["conv_weight"].init.bound == "1 / math.sqrt(in_channels * 9)"
    # near PyTorch's ones and zeros, not equal: a kernel ignoring them must fail
    weight, norm_bias = inputs["group_norm_weight"].init, inputs["group_norm_bias"].init
    assert (weight.kind, weight.scale, weight.offset) == ("normal", 0.1, 1.0)
    assert (norm_bias.kind, norm_bias.scale, norm_bias.offset) == ("normal", 0.1, 0.0)
    assert (inputs["bias"].init.kind, inputs["bias"].init.scale) == ("normal", 0.02)
    # kernel_size and groups are hyperparameters (literals); the channels stay named sizes
    assert [str(getattr(d, "expr", d)) for d in inputs["conv_weight"].shape] == [
        "out_channels",
        "in_channels",
        "3",
        "3",
    ]


def test_transposed_conv_fan_in_is_out_channels_over_groups_times_the_kernel():
    translation = translated(KERNELBENCH / "conv_transpose1d_sigmoid.py")
    weight = next(t for t in translation.inputs if t.name == "conv_transpose_weight")
    assert weight.init.bound == "1 / math.sqrt(out_channels // 4 * 3)"
    assert [t.name for t in translation.inputs] == ["x", "conv_transpose_weight"]  # bias=False


def test_sizes_tied_by_code_keep_their_definition():
    translation = translated(KERNELBENCH / "sequential_batchnorm1d_selu.py")
    assert translation.constants["hidden"] == (256, "(in_features * 2)")
    names = [t.name for t in translation.inputs]
    assert names == [
        "x",
        "net_0_weight",
        "net_0_bias",
        "net_1_weight",
        "net_1_bias",
        "net_4_weight",
    ]


def test_an_unsupported_operator_is_named_with_its_line():
    path = KERNELBENCH / "unsupported_fft.py"
    with pytest.raises(
        TaskImportError, match=r"unsupported_fft.py: line 11: operator `torch.fft.rfft`"
    ):
        TorchModuleImporter().translate(path, path.read_text(), ImportOptions())


def test_an_unsupported_layer_and_a_loop_are_named_with_their_lines():
    layer = (KERNELBENCH / "gemm_relu_divide.py").read_text().replace("nn.Linear(", "nn.Bilinear(")
    with pytest.raises(TaskImportError, match=r"line 10: layer nn.Bilinear is not supported"):
        translate_module(layer, "m")
    loop = (
        (KERNELBENCH / "gemm_relu_divide.py")
        .read_text()
        .replace(
            "        x = torch.relu(x)\n",
            "        for _ in range(2):\n            x = torch.relu(x)\n",
        )
    )
    with pytest.raises(TaskImportError, match=r"line 15: `for` statements are not supported"):
        translate_module(loop, "m")


def test_only_kernelbench_module_files_are_detected():
    importer = TorchModuleImporter()
    path = KERNELBENCH / "rms_norm.py"
    assert importer.detects(path, path.read_text())
    assert not importer.detects(Path("f.py"), "import jax\ndef computation(x):\n    return x\n")
    assert not importer.detects(Path("f.py"), "def (:")


@pytest.mark.skipif(torch_available(), reason="with torch installed the import compares instead")
def test_without_torch_the_task_says_it_was_not_compared():
    path = KERNELBENCH / "rms_norm.py"
    source = TorchModuleImporter().translate(
        path, path.read_text(), ImportOptions(tolerance=(1e-3, 1e-4))
    )
    assert NOT_COMPARED in source.notes
    assert (source.atol, source.rtol) == (1e-3, 1e-4)


def test_inputs_scaled_and_shifted_from_a_factory_keep_their_distribution():
    source = (
        (KERNELBENCH / "gemm_relu_divide.py")
        .read_text()
        .replace(
            "torch.randn(batch_size, in_features)", "1 - torch.rand(batch_size, in_features) * 2"
        )
    )
    x = translate_module(source, "m").inputs[0]
    assert (x.init.kind, x.init.scale, x.init.offset) == ("uniform", -2.0, 1.0)
    divided = source.replace("1 - torch.rand(batch_size, in_features) * 2", "2 / torch.rand(4)")
    with pytest.raises(TaskImportError, match="line 27: a tensor may only be a factory"):
        translate_module(divided, "m")


def test_a_task_notes_batchnorm_statistics_and_dropout_only_where_the_module_has_them():
    def notes(module: str) -> tuple[str, ...]:
        source = (KERNELBENCH / f"{module}.py").read_text()
        return mode_notes(translate_module(source, module).operators)

    assert notes("gemm_relu_divide") == ()
    assert notes("sequential_batchnorm1d_selu") == (BATCH_NORM_NOTE, DROPOUT_NOTE)
    assert notes("conv_transpose1d_sigmoid") == (DROPOUT_NOTE,)


def test_a_learned_parameter_pytorch_starts_at_ones_is_drawn_near_them_and_the_task_says_so():
    path = KERNELBENCH / "rms_norm_last_dim.py"
    ones = path.read_text().replace("torch.randn(hidden_size)", "torch.ones(hidden_size)")
    assert ones != path.read_text()
    (weight,) = [t for t in translate_module(ones, "m").inputs if t.torch_path == "weight"]
    assert (weight.init.kind, weight.init.offset, weight.init.around) == ("normal", 1.0, 1.0)
    header = TorchModuleImporter().translate(path, ones, ImportOptions()).reference_py
    assert "Learned parameters PyTorch starts at ones or zeros (weight) are drawn" in header
    # a parameter drawn at random in the module itself is left as PyTorch draws it
    drawn = TorchModuleImporter().translate(path, path.read_text(), ImportOptions()).reference_py
    assert "Learned parameters PyTorch starts" not in drawn


def test_a_triton_file_whose_forward_is_plain_pytorch_says_its_kernel_is_not_the_task():
    path = TESTS / "data" / "porting" / "triton_softmax.py"
    notes = TorchModuleImporter().translate(path, path.read_text(), ImportOptions()).notes
    assert any("Triton kernel is not part of this task" in note for note in notes)
    plain = KERNELBENCH / "gemm_relu_divide.py"
    plain_notes = TorchModuleImporter().translate(plain, plain.read_text(), ImportOptions()).notes
    assert not any("kernel is not part of this task" in note for note in plain_notes)


@pytest.mark.parametrize(
    ("stem", "groups"),
    [("matmul_groupnorm_leakyrelu_sum", 512), ("gemm_biasadd_hardtanh_mish_groupnorm", 256)],
)
def test_a_group_norms_group_count_keeps_dividing_its_features_at_every_derived_size(stem, groups):
    """KernelBench's GroupNorm modules: the translated reference writes the group count as a
    literal (`group_norm(x, 512, ...)`), so halving the features alone to 16 (as the comparison
    with PyTorch did) reshapes (16, 8192 -> 16) into (16, 512, 0)."""
    path = KERNELBENCH / f"{stem}.py"
    translation = translate_module(path.read_text(), stem)
    features = next(n for n in translation.constants if n in ("hidden_size", "out_features"))
    small = comparison_sizes(translation)
    assert small[features] % groups == 0 and small[features] >= groups
    # the attack the rule answers: halving without the reference's divisors
    bare = {n: v for n, (v, _) in translation.constants.items()}
    assert shrunk_sizes(bare, (), SMALLEST)[features] % groups != 0
    source = TorchModuleImporter().translate(path, path.read_text(), ImportOptions())
    derivation = plan_derivation(ast.parse(source.reference_py), "get_inputs")
    assert derivation.derived, derivation.fallback
    for config in ("check", "heldout"):
        assert derivation.sizes[config][features] % groups == 0
