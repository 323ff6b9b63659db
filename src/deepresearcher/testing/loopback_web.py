"""The synthetic world as a *live* web on loopback: its pages on a real website, a Serper emulator indexing them.

With it, the live path runs end to end with no internet: the Serper backend (with its resilience
layer) queries the emulator, whose hits point at the website; browsing fetches those pages over
HTTP with the live fetcher; the cache records both. Tests of the handler service and ``bench env``
use it.

Example::

    with LoopbackWeb.from_world(world_dir).running() as web:
        config = web.config(cache_path=tmp / "cache.sqlite")   # needs web.env_vars in os.environ
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import yaml

from deepresearcher.config import Config
from deepresearcher.testing.emulators import SearchEmulator
from deepresearcher.testing.website import LoopbackWebsite
from deepresearcher.web.html import html_to_text
from deepresearcher.world import iter_pages

SERPER_KEY_ENV = "DEEPRESEARCHER_LOOPBACK_SERPER_KEY"
SERPER_KEY = "loopback-serper-key"


class LoopbackWeb:
    """A website of pages plus a Serper emulator over the same pages (hits link to the website)."""

    def __init__(self, pages: list[dict[str, str]]) -> None:
        self.pages = pages
        self.site = LoopbackWebsite()
        for page in pages:
            self.site.add(LoopbackWebsite.local_path(page["url"]), page.get("title", ""), page["html"])
        self.search: SearchEmulator  # made by running(): its hits need the website's address
        self.env_vars = {SERPER_KEY_ENV: SERPER_KEY}

    @classmethod
    def from_world(cls, world_dir: str | Path, max_pages: int | None = None) -> LoopbackWeb:
        """Serve a built world's pages (the first ``max_pages`` of them, if given)."""
        pages = []
        for page in iter_pages(world_dir):
            pages.append(page)
            if max_pages is not None and len(pages) >= max_pages:
                break
        return cls(pages)

    @contextmanager
    def running(self) -> Iterator[LoopbackWeb]:
        """Start the website, then the emulator with hits that link to the website's copies."""
        with ExitStack() as stack:
            stack.enter_context(self.site.running())
            docs = [
                {"url": self.site.local_url(p["url"]), "title": p.get("title", ""), "text": html_to_text(p["html"])}
                for p in self.pages
            ]
            self.search = SearchEmulator(docs, flavor="serper", api_key=SERPER_KEY)
            stack.enter_context(self.search.running())
            yield self

    def config_data(self, cache_path: str | Path, cache_mode: str = "readwrite") -> dict[str, Any]:
        """Config (as YAML data) for an environment on this web: Serper backend, live fetch, a cache."""
        return {
            "search": {"backend": "serper"},
            "backends": {
                "serper": {
                    "base_url": self.search.base_url,
                    "api_key_env": SERPER_KEY_ENV,
                    "concurrency": 256,
                    "rate_per_s": 100000.0,
                    "burst": 100000,
                    "backoff_s": 0.01,
                    "max_backoff_s": 0.2,
                }
            },
            "fetch": {"allow_private": True},
            "cache": {"path": str(cache_path), "mode": cache_mode},
            "browse": {"reader": "extractive"},
        }

    def config(self, cache_path: str | Path, cache_mode: str = "readwrite") -> Config:
        return Config.model_validate(self.config_data(cache_path, cache_mode))

    def write_config(self, path: str | Path, cache_path: str | Path, cache_mode: str = "readwrite") -> Path:
        """The same config as a YAML file, for ``deepresearcher serve --config``."""
        path = Path(path)
        path.write_text(yaml.safe_dump(self.config_data(cache_path, cache_mode)), encoding="utf-8")
        return path
