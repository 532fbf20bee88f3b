"""With torch installed (optional extra `port`), each translated module agrees with PyTorch on
the same inputs and weights, and a wrong translation is refused naming its first diverging
operator. Skipped without torch; the note of that case is tested in test_translate."""

import dataclasses

import pytest

from maxkernel_tui.kernels.porting.torch_compare import compare, compare_or_note, torch_available
from maxkernel_tui.kernels.porting.translate import translate_module
from maxkernel_tui.kernels.task import TaskImportError
from tests.support.paths import KERNELBENCH

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not torch_available(), reason="torch is not installed (optional extra `port`)"
    ),
]
MODULES = sorted(p for p in KERNELBENCH.glob("*.py") if not p.stem.startswith("unsupported"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_each_translated_module_agrees_with_pytorch(path):
    translation = translate_module(path.read_text(), path.stem)
    _, result = compare(path.read_text(), translation, atol=1e-4, rtol=1e-4)
    assert (result.error, result.agrees) == (None, True)
    assert result.compared == len(translation.body) + 1  # every statement and the output


def test_a_wrong_translation_names_its_first_diverging_operator():
    path = KERNELBENCH / "gemm_relu_divide.py"
    translation = translate_module(path.read_text(), path.stem)
    body = [
        dataclasses.replace(s, code=s.code.replace("jax.nn.relu", "jax.nn.sigmoid"))
        for s in translation.body
    ]
    wrong = dataclasses.replace(translation, body=body)
    with pytest.raises(TaskImportError, match=r"first at line 15: `x = torch.relu\(x\)`"):
        compare_or_note(path.read_text(), wrong, 1e-4, 1e-4, path)
