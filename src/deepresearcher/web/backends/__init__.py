"""Search backends by name: ``make_backend(search_config, backends_config)`` builds the configured one.

=========  ==========================================  =====================
name       what                                        key (environment)
=========  ==========================================  =====================
local      tantivy BM25 index over a corpus or world   —
serper     Google through serper.dev                   SERPER_API_KEY
searxng    a self-hosted SearXNG instance              —
brave      Brave Search API                            BRAVE_API_KEY
ddgs       DuckDuckGo via ``pip install ddgs``         —
retriever  a Search-R1-style ``/retrieve`` server      —
=========  ==========================================  =====================

Live backends are wrapped in :class:`~deepresearcher.web.resilience.ResilientBackend` (limits, retries,
circuit breaker), and their hits pass the answer-leak filter (``backends.blocked``). A name of the form
``package.module:Factory`` loads user code: ``Factory(settings)`` gets ``backends.custom`` and must
return a backend.
Modules are imported only when their backend is built, so a missing optional package costs nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from deepresearcher.errors import ConfigError
from deepresearcher.web.backends.base import SearchBackend

if TYPE_CHECKING:
    from deepresearcher.config import BackendsConfig, BackendSettings, SearchConfig
    from deepresearcher.web.backends.local import LocalIndex

# name -> "module:class" of a live backend with ``from_settings(BackendSettings)``.
LIVE_BACKENDS: dict[str, str] = {
    "serper": "deepresearcher.web.backends.serper:SerperBackend",
    "searxng": "deepresearcher.web.backends.searxng:SearxngBackend",
    "brave": "deepresearcher.web.backends.brave:BraveBackend",
    "ddgs": "deepresearcher.web.backends.ddgs:DdgsBackend",
    "retriever": "deepresearcher.web.backends.retriever:RetrieverBackend",
}
BACKEND_NAMES: tuple[str, ...] = ("local", *LIVE_BACKENDS)

__all__ = ["BACKEND_NAMES", "SearchBackend", "make_backend", "make_live_backend"]


def _load(target: str) -> Callable[..., object]:
    module_name, _, attr = target.partition(":")
    try:
        found: object = importlib.import_module(module_name)
        for part in attr.split("."):
            found = getattr(found, part)
        return found  # type: ignore[return-value]
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"Cannot load search backend {target!r} ({exc}); use one of {', '.join(BACKEND_NAMES)} "
                          "or a `package.module:Factory` path importable here.") from exc


def make_live_backend(name: str, settings: BackendSettings) -> SearchBackend:
    """The bare backend ``name`` (no resilience, no filter), built from its settings."""
    if name in LIVE_BACKENDS:
        return _load(LIVE_BACKENDS[name]).from_settings(settings)  # type: ignore[attr-defined]
    if ":" in name:
        backend = _load(name)(settings)
        if not isinstance(backend, SearchBackend):
            raise ConfigError(f"{name!r} returned {type(backend).__name__}, which lacks name/search/aclose "
                              "(see deepresearcher.web.backends.base.SearchBackend).")
        return backend
    raise ConfigError(f"Unknown search backend {name!r} (search.backend); use one of {', '.join(BACKEND_NAMES)} "
                      "or a `package.module:Factory` path.")


def make_backend(
    search: SearchConfig,
    backends: BackendsConfig | None = None,
    *,
    index: LocalIndex | str | Path | None = None,
    resilient: bool = True,
) -> SearchBackend:
    """The backend ``search.backend`` names, ready to use.

    ``index`` is the local backend's index: an opened ``LocalIndex`` is used as it is (the environment opens
    one and shares it with its page store), a directory only when ``search.index`` is unset. ``resilient=False`` skips limits and retries (only for tests).
    """
    from deepresearcher.config import BackendsConfig
    from deepresearcher.web.leak_filter import FilteredBackend, LeakFilter
    from deepresearcher.web.resilience import ResilientBackend, limits_from_settings

    backends = backends or BackendsConfig()
    name = search.backend
    backend: SearchBackend
    if name == "local":  # not filtered: its corpus is chosen by the user, and callers use its page store
        from deepresearcher.web.backends.local import LocalIndex, LocalSearchBackend

        where = index if isinstance(index, LocalIndex) else search.index or index
        if where is None:
            raise ConfigError("The local search backend needs an index: set search.index to an index directory "
                              "(build one with `deepresearcher index build --corpus FILE --out DIR`).")
        backend = LocalSearchBackend(where, snippet_chars=search.snippet_chars)
    else:
        settings = getattr(backends, name) if name in LIVE_BACKENDS else backends.custom
        backend = make_live_backend(name, settings)
        if resilient:
            backend = ResilientBackend(backend, limits_from_settings(settings))
        if backends.blocked:
            backend = FilteredBackend(backend, LeakFilter(backends.blocked))
    return backend
