"""The porter: a Triton kernel file becomes a task through the porter role of a real
google-genai client against the fake Gemini server, gated by the comparison with the file's
PyTorch harness (torch installed) or by the engineer; without an LLM provider, a CUDA file gets
a clear message."""

import pytest

from maxkernel_tui.agents.builtin.provider import BuiltinProvider
from maxkernel_tui.agents.llm.client import LLMClient
from maxkernel_tui.agents.llm.gemini import GeminiProvider
from maxkernel_tui.agents.llm.retry import RetryPolicy
from maxkernel_tui.agents.porting import PorterImporter, Review
from maxkernel_tui.commands.port_review import approve_on_terminal
from maxkernel_tui.kernels.importers import ImportOptions
from maxkernel_tui.kernels.importers.registry import offline_importers, translate
from maxkernel_tui.kernels.porting.side_by_side import side_by_side
from maxkernel_tui.kernels.porting.torch_compare import NOT_COMPARED, torch_available
from maxkernel_tui.kernels.task import TaskImportError
from tests.fakes.role_gemini import RoleGemini, ServedInThread
from tests.support.llm import GEMINI_KEY
from tests.support.paths import KERNELBENCH, TESTS
from tests.support.porter_answers import porter_answer, softmax_reference

PORTING = TESTS / "data" / "porting"
TRITON = PORTING / "triton_softmax.py"
REFERENCE = softmax_reference(4096, 1024)
ANSWER = porter_answer(REFERENCE)


class Engineer:
    def __init__(self, approves: bool) -> None:
        self.approves = approves
        self.reviews: list[Review] = []

    def __call__(self, review: Review) -> bool:
        self.reviews.append(review)
        return self.approves


def porter(server, engineer: Engineer) -> PorterImporter:
    provider = GeminiProvider("gemini-test", base_url=server.url, api_key=GEMINI_KEY)
    return PorterImporter(LLMClient(provider, policy=RetryPolicy(max_attempts=1)), engineer)


def test_a_triton_file_becomes_a_task_through_the_porter_role():
    engineer = Engineer(approves=True)
    broken = "```python\nimport torch\n```"  # re-asked: the parser refuses torch
    with ServedInThread(RoleGemini({"porter": [broken, ANSWER]})) as server:
        importer = porter(server, engineer)
        assert importer.detects(TRITON, TRITON.read_text())
        if torch_available():
            pytest.skip("with torch the comparison gates it (the test below)")
        task = importer.translate(TRITON, TRITON.read_text(), ImportOptions())
    assert server.roles == ["porter", "porter"]
    assert task.reference_py == REFERENCE
    assert task.task_id == "triton_softmax"
    assert engineer.reviews[0].reason == NOT_COMPARED
    assert engineer.reviews[0].source == TRITON.read_text()
    assert task.notes[1] == f"approved by the engineer ({NOT_COMPARED})"
    assert task.extra_files["source_module.py"] == TRITON.read_text()


@pytest.mark.slow
@pytest.mark.skipif(not torch_available(), reason="torch is not installed (optional extra `port`)")
def test_with_torch_the_porters_reference_is_checked_against_the_pytorch_harness():
    wrong = ANSWER.replace("jax.nn.softmax(x, axis=1)", "jax.nn.softmax(x, axis=0)")
    with ServedInThread(RoleGemini({"porter": [ANSWER, wrong]})) as server:
        importer = porter(server, Engineer(approves=False))
        task = importer.translate(TRITON, TRITON.read_text(), ImportOptions())
        assert "compared with the file's PyTorch harness at batch_size=16, dim=16" in task.notes[1]
        with pytest.raises(TaskImportError, match="disagrees with the PyTorch harness"):
            importer.translate(TRITON, TRITON.read_text(), ImportOptions())


def test_a_reference_the_engineer_rejects_is_not_written():
    cuda = PORTING / "vector_add.cu"
    served = ServedInThread(RoleGemini({"porter": [ANSWER]}))
    with served as server, pytest.raises(TaskImportError, match="not approved; nothing written"):
        porter(server, Engineer(approves=False)).translate(cuda, cuda.read_text(), ImportOptions())


def test_a_cuda_file_without_an_llm_provider_gets_a_clear_message():
    cuda = PORTING / "vector_add.cu"
    for client in (None, LLMClient(BuiltinProvider())):
        importer = PorterImporter(client, Engineer(approves=True))
        assert importer.detects(cuda, cuda.read_text())
        with pytest.raises(
            TaskImportError, match=r"needs an LLM provider .* built-in offline agent cannot port"
        ):
            importer.translate(cuda, cuda.read_text(), ImportOptions())


def test_the_review_shows_source_and_reference_side_by_side():
    text = side_by_side("a\nbb", "x = 1\ny = 2\nz = 3", width=30, titles=("source", "JAX"))
    assert [part.strip() for part in text.splitlines()[0].split("│")] == ["source", "JAX"]
    assert [line.split("│")[0].strip() for line in text.splitlines()[2:]] == ["a", "bb", ""]
    assert [line.split("│")[1].strip() for line in text.splitlines()[2:]] == [
        "x = 1",
        "y = 2",
        "z = 3",
    ]


def test_on_a_terminal_only_yes_approves_the_reference(tmp_path):
    review = Review(tmp_path / "k.cu", "__global__ void k() {}", REFERENCE, "no harness")
    shown: list[str] = []

    def ended(prompt: str) -> str:
        raise EOFError

    assert approve_on_terminal(review, ask=lambda prompt: "y", show=shown.append)
    assert not approve_on_terminal(review, ask=lambda prompt: "", show=shown.append)
    assert not approve_on_terminal(review, ask=ended, show=shown.append)
    assert "__global__ void k() {}" in shown[1] and "def computation(x):" in shown[1]


def test_a_module_the_translator_refuses_goes_to_the_porter_which_needs_a_provider():
    module = KERNELBENCH / "unsupported_fft.py"
    importers = (*offline_importers(), PorterImporter(None, Engineer(approves=True)))
    with pytest.raises(TaskImportError) as refused:
        translate(module, module.read_text(), ImportOptions(), importers)
    offline, porter = str(refused.value).split("; then ")
    assert "fft" in offline and "line 11" in offline
    assert "porting a PyTorch source needs an LLM provider" in porter
