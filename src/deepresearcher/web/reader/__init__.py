"""Readers by name: ``make_reader(config)`` builds the one ``browse.reader`` names.

==============  ===================================================================
name            what
==============  ===================================================================
extractive      BM25-ranked passages of the page, no model
embedding       passages ranked by a small sentence-embedding model (MiniLM)
raw             the page's first tokens, as they are
llm             a chat model takes notes chunk by chunk (``reader_llm``)
deepresearcher  the original's reader prompt over page-sized viewports (``reader_llm``)
==============  ===================================================================

Each reader module has ``build(config) -> Reader``, which reads what it needs of ``browse`` and
``reader_llm``; a new reader is that module and its line in :data:`READERS`. Modules are imported
only when their reader is built, so a missing optional package costs nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from deepresearcher.errors import ConfigError

if TYPE_CHECKING:
    from deepresearcher.config import Config
    from deepresearcher.web.reader.base import Reader

READERS: dict[str, str] = {
    "extractive": "deepresearcher.web.reader.extractive",
    "embedding": "deepresearcher.web.reader.embedding",
    "raw": "deepresearcher.web.reader.raw",
    "llm": "deepresearcher.web.reader.llm",
    "deepresearcher": "deepresearcher.web.reader.deepresearcher",
}
"""name -> the module whose ``build(config)`` makes that reader."""

RECORDED_READERS = frozenset({"llm", "deepresearcher"})
"""Readers whose outputs are recorded in the cache: they call a model, so they cost money and can drift."""


def make_reader(config: Config) -> Reader:
    """The reader ``browse.reader`` names, built from the browse (and reader_llm) config."""
    name = config.browse.reader
    if name not in READERS:
        raise ConfigError(f"Unknown reader {name!r} (browse.reader); use one of {', '.join(READERS)}.")
    return importlib.import_module(READERS[name]).build(config)
