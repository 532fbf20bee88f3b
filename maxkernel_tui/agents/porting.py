"""Porting through the porter sub-agent: CUDA and Triton sources, and PyTorch modules the
offline translator does not cover, become plain tasks. No jax, no torch in this process.

`PorterImporter` follows the importers' contract (`kernels.importers.SourceImporter`). Its answer
is gated by the comparison with PyTorch where the file has a PyTorch harness and torch is
installed; otherwise the engineer approves it, shown beside the source (`Review`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from maxkernel_tui.agents.llm.client import LLMClient
from maxkernel_tui.agents.llm.errors import LLMError, ProviderConfigError
from maxkernel_tui.agents.orchestration.session import provider_settings
from maxkernel_tui.agents.providers import build_provider
from maxkernel_tui.agents.roles.porter import build_port_request, parse_reference
from maxkernel_tui.config import Settings
from maxkernel_tui.kernels.importers import (
    ImporterKind,
    ImportOptions,
    PlainTaskSource,
    SourceImporter,
)
from maxkernel_tui.kernels.importers.registry import offline_importers
from maxkernel_tui.kernels.importers.torch_module import (
    DEFAULT_TOLERANCE,
    SOURCE_COPY,
    TorchModuleImporter,
    task_id_of,
)
from maxkernel_tui.kernels.porting.sources import has_pytorch_harness, kernel_source_kind
from maxkernel_tui.kernels.porting.torch_compare import (
    NOT_COMPARED,
    compare_reference,
    describe_sizes,
    torch_available,
)
from maxkernel_tui.kernels.task import TaskImportError

BUILTIN = "builtin"
NO_PROVIDER = (
    "porting a {kind} source needs an LLM provider (gemini or openai, in the settings or with "
    "--provider); the built-in offline agent cannot port CUDA or Triton code"
)


@dataclass(frozen=True)
class Review:
    """What the engineer approves: the source and the porter's reference, and why no
    comparison with PyTorch decided instead."""

    path: Path
    source: str
    reference: str
    reason: str


Approve = Callable[[Review], bool]


class PorterImporter:
    """CUDA/Triton files, and KernelBench modules the offline translator refused (it is tried
    first: the porter comes after it in `task_importers`), through the porter agent. `client` is
    None when no LLM provider is configured: the import then says what to set."""

    kind = ImporterKind.PORTER

    def __init__(
        self, client: LLMClient | None, approve: Approve, model: str | None = None
    ) -> None:
        """`model`: the porter's own (`[roles.porter] model`), else the provider's."""
        self.client = client
        self.approve = approve
        self.model = model
        self._modules = TorchModuleImporter()

    def detects(self, path: Path, source: str) -> bool:
        return kernel_source_kind(path, source) is not None or self._modules.detects(path, source)

    def translate(self, path: Path, source: str, options: ImportOptions) -> PlainTaskSource:
        kind = kernel_source_kind(path, source) or "PyTorch"
        client = self._usable()
        if client is None:
            raise TaskImportError(f"{path}: " + NO_PROVIDER.format(kind=kind))
        reference = self._ask(client, path, source, kind)
        atol, rtol = options.tolerance or DEFAULT_TOLERANCE
        note = self._gate(path, source, reference, atol, rtol)
        return PlainTaskSource(
            task_id=task_id_of(path),
            description=f"{kind} source {path.name} ported to JAX by the porter agent",
            reference_py=reference,
            atol=atol,
            rtol=rtol,
            notes=(f"reference written by the porter agent ({client.provider.name})", note),
            extra_files={SOURCE_COPY if path.suffix == ".py" else f"source{path.suffix}": source},
        )

    def _usable(self) -> LLMClient | None:
        if self.client is None or self.client.provider.name == BUILTIN:
            return None
        return self.client

    def _ask(self, client: LLMClient, path: Path, source: str, kind: str) -> str:
        request = build_port_request(
            source, path.name, kind, has_pytorch_harness(path, source), model=self.model
        )
        try:
            response = asyncio.run(client.complete(request, parse=parse_reference))
        except LLMError as error:
            raise TaskImportError(f"{path}: the porter agent failed: {error}") from None
        return parse_reference(response.text)

    def _gate(self, path: Path, source: str, reference: str, atol: float, rtol: float) -> str:
        """The note for the task once the reference passed its gate; a `TaskImportError` if the
        comparison or the engineer refused it."""
        if has_pytorch_harness(path, source) and torch_available():
            sizes, result = compare_reference(source, reference, atol, rtol)
            shown = describe_sizes(sizes)
            if result.error or not result.agrees:
                raise TaskImportError(
                    f"{path}: the porter's reference disagrees with the PyTorch harness at "
                    f"{shown}: {result.error or result.detail}; nothing written"
                )
            return (
                f"compared with the file's PyTorch harness at {shown}: agrees within atol "
                f"{atol}, rtol {rtol} (max |difference| {result.max_abs_diff:.2e}, measured)"
            )
        reason = "the file has no PyTorch harness"
        if has_pytorch_harness(path, source):
            reason = NOT_COMPARED
        if not self.approve(Review(path, source, reference, reason)):
            raise TaskImportError(
                f"{path}: the porter's reference was not approved; nothing written"
            )
        return f"approved by the engineer ({reason})"


def task_importers(settings: Settings, approve: Approve) -> tuple[SourceImporter, ...]:
    """What `tasks import` tries, in order: the offline importers, then the porter with the
    configured provider (CUDA and Triton files, and modules the translator refuses). A
    provider that cannot be built (a missing key) leaves the porter without a client: it then
    says what to set, and only when a file needs it."""
    try:
        client: LLMClient | None = LLMClient(build_provider(provider_settings(settings)))
    except ProviderConfigError:
        client = None
    return (*offline_importers(), PorterImporter(client, approve, settings.role_model("porter")))
