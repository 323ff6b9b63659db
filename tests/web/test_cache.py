"""The record/replay cache: hits, replay, TTL, statistics, export/import, prune and many writers."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from deepresearcher.cli import cache_cmd
from deepresearcher.errors import ConfigError, ReplayMissError
from deepresearcher.web.cache import WebCache, cached, normalize_url
from deepresearcher.web.types import SearchHit


class Upstream:
    """A stand-in for a live backend that counts its calls (the thing the cache must spare)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def search(self, query: str) -> list[SearchHit]:
        self.calls.append(query)
        await asyncio.sleep(0.01)
        return [SearchHit(title=f"About {query}", url=f"https://example.org/{len(self.calls)}", snippet=query)]


def encode(hits: list[SearchHit]) -> list[dict]:
    return [h.model_dump() for h in hits]


def decode(data: list[dict]) -> list[SearchHit]:
    return [SearchHit(**d) for d in data]


async def search(cache: WebCache | None, upstream: Upstream, query: str, top_k: int = 10) -> list[SearchHit]:
    return await cached(
        cache, "search", "serper", query, {"top_k": top_k}, lambda: upstream.search(query), encode=encode, decode=decode
    )


async def test_repeated_query_never_reaches_upstream_again(tmp_path: Path) -> None:
    """A second ask, even with other case and spacing, is served from the file; other params miss."""
    upstream = Upstream()
    async with WebCache(tmp_path / "c.sqlite") as cache:
        first = await search(cache, upstream, "Who wrote Dune?")
        again = await search(cache, upstream, "  who   WROTE dune? ")
        assert again == first
        assert upstream.calls == ["Who wrote Dune?"]
        await search(cache, upstream, "Who wrote Dune?", top_k=5)
        assert len(upstream.calls) == 2
    # A new process (a new cache object) still hits.
    async with WebCache(tmp_path / "c.sqlite") as cache:
        assert await search(cache, upstream, "who wrote dune?") == first
    assert len(upstream.calls) == 2


async def test_identical_requests_in_flight_share_one_live_call(tmp_path: Path) -> None:
    """Sixteen concurrent asks for one query make one upstream call and all get its answer."""
    upstream = Upstream()
    async with WebCache(tmp_path / "c.sqlite") as cache:
        results = await asyncio.gather(*(search(cache, upstream, "same query") for _ in range(16)))
    assert upstream.calls == ["same query"]
    assert all(r == results[0] for r in results)


async def test_replay_serves_with_zero_upstream_calls_and_fails_clearly_on_miss(tmp_path: Path) -> None:
    """Replay answers recorded requests without calling out, and a miss names the request and the fix."""
    path = tmp_path / "c.sqlite"
    upstream = Upstream()
    async with WebCache(path) as cache:
        recorded = [await search(cache, upstream, q) for q in ("alpha", "beta")]
    replay_upstream = Upstream()
    async with WebCache(path, mode="replay", ttl_s={"search": 0.0}) as cache:  # replay ignores TTLs
        assert [await search(cache, replay_upstream, q) for q in ("alpha", "beta")] == recorded
        with pytest.raises(ReplayMissError, match=r"'gamma'.*cache.mode=readwrite"):
            await search(cache, replay_upstream, "gamma")
    assert replay_upstream.calls == []


def test_replay_of_a_missing_file_says_how_to_record(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist; record it first with cache.mode=readwrite"):
        WebCache(tmp_path / "nothing.sqlite", mode="replay")


async def test_off_mode_always_calls_live_and_writes_nothing(tmp_path: Path) -> None:
    upstream = Upstream()
    async with WebCache(tmp_path / "c.sqlite", mode="off") as cache:
        await search(cache, upstream, "q")
        await search(cache, upstream, "q")
    assert len(upstream.calls) == 2
    assert not (tmp_path / "c.sqlite").exists()


async def test_expired_record_is_refreshed_in_readwrite(tmp_path: Path) -> None:
    """With a zero TTL every record is stale, so readwrite calls live again and overwrites it."""
    upstream = Upstream()
    async with WebCache(tmp_path / "c.sqlite", ttl_s={"search": 0.0}) as cache:
        first = await search(cache, upstream, "q")
        second = await search(cache, upstream, "q")
    assert len(upstream.calls) == 2
    assert first != second  # the upstream numbers its answers


async def test_failed_live_call_is_not_recorded(tmp_path: Path) -> None:
    async def boom() -> list:
        raise RuntimeError("upstream down")

    async with WebCache(tmp_path / "c.sqlite") as cache:
        with pytest.raises(RuntimeError):
            await cached(cache, "search", "serper", "q", {}, boom)
        assert cache.stats().entries == 0


async def test_stats_count_hits_and_money_saved_across_processes(tmp_path: Path) -> None:
    """Hits and misses persist in the file, priced per backend."""
    path = tmp_path / "c.sqlite"
    upstream = Upstream()
    async with WebCache(path, prices={"serper": 0.002}) as cache:
        for q in ("a", "b", "a", "a", "b"):
            await search(cache, upstream, q)
    with WebCache(path, prices={"serper": 0.002}) as cache:
        stats = cache.stats()
    assert (stats.entries, stats.hits, stats.misses) == (2, 3, 2)
    assert stats.calls_saved == 3
    assert stats.money_saved == pytest.approx(0.006)
    assert stats.hit_rate == pytest.approx(0.6)
    assert stats.size_bytes > 0


async def test_export_import_round_trip_and_prune(tmp_path: Path) -> None:
    """Exported records replay from another file; prune drops old records only."""
    upstream = Upstream()
    async with WebCache(tmp_path / "a.sqlite") as cache:
        recorded = await search(cache, upstream, "alpha")
        await cached(cache, "fetch", "http", "HTTPS://Example.org/x#frag", {}, _page)
        assert cache.export_jsonl(tmp_path / "rec.jsonl") == 2
        assert cache.export_jsonl(tmp_path / "search.jsonl", kind="search") == 1
    with WebCache(tmp_path / "b.sqlite") as cache:
        assert cache.import_jsonl(tmp_path / "rec.jsonl") == 2
    async with WebCache(tmp_path / "b.sqlite", mode="replay") as cache:
        assert await search(cache, Upstream(), "alpha") == recorded
        assert await cached(cache, "fetch", "http", "https://example.org/x", {}, _page) == {"text": "page"}
    with WebCache(tmp_path / "b.sqlite", ttl_s={"search": 0.0, "fetch": None}) as cache:
        assert cache.prune(expired=True) == 1  # the search record is past its zero TTL
        assert cache.prune(expired=False, older_than_s=0.0) == 1
        assert cache.stats().entries == 0


async def _page() -> dict:
    return {"text": "page"}


def test_normalize_url_keeps_what_matters() -> None:
    assert normalize_url(" HTTPS://Example.ORG/A?b=1#top ") == "https://example.org/A?b=1"
    assert normalize_url("https://example.org") == "https://example.org/"


def _writer(path: str, worker: int, n: int) -> None:
    async def go() -> None:
        async with WebCache(path) as cache:
            await asyncio.gather(
                *(cache.put("search", "serper", f"w{worker}-q{i}", {}, {"i": i}) for i in range(n))
            )

    asyncio.run(go())


def test_many_processes_writing_one_file_lose_nothing(tmp_path: Path) -> None:
    """Four processes record 300 answers each into one file at the same time: all 1,200 are there."""
    path = tmp_path / "shared.sqlite"
    WebCache(path).close()  # create the schema once
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(path), w, 300)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM records").fetchone()[0] == 1200


def _write_until_killed(path: str, acked: Any) -> None:
    async def go() -> None:
        cache = WebCache(path)
        i = 0
        while True:
            await cache.put("search", "serper", f"q{i}", {}, {"i": i})
            i += 1
            acked.value = i  # the caller has been told: recorded

    asyncio.run(go())


def test_a_killed_process_keeps_every_record_it_acknowledged(tmp_path: Path) -> None:
    """SIGKILL a process in the middle of recording: every put that returned is in the file."""
    path = tmp_path / "killed.sqlite"
    WebCache(path).close()
    ctx = multiprocessing.get_context("fork")
    acked = ctx.Value("i", 0)
    proc = ctx.Process(target=_write_until_killed, args=(str(path), acked))
    proc.start()
    deadline = time.monotonic() + 30
    while acked.value < 300 and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    assert acked.value >= 300
    with sqlite3.connect(path) as conn:
        recorded = {row[0] for row in conn.execute("SELECT request FROM records")}
    assert {json.dumps(f"q{i}") for i in range(acked.value)} <= recorded


def test_cli_stats_export_import_prune(tmp_path: Path) -> None:
    """The `cache` commands work on the configured file and report what they did."""
    path = tmp_path / "c.sqlite"
    asyncio.run(_record(path))
    app = typer.Typer()
    app.command("noop")(lambda: None)
    cache_cmd.register(app)
    runner = CliRunner()
    where = ["--set", f"cache.path={path}"]

    result = runner.invoke(app, ["cache", "stats", "--json", *where])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert (summary["entries"], summary["hits"], summary["misses"]) == (1, 1, 1)
    assert summary["money_saved"] == pytest.approx(0.001)

    out = tmp_path / "rec.jsonl"
    assert runner.invoke(app, ["cache", "export", str(out), *where]).exit_code == 0
    other = ["--set", f"cache.path={tmp_path / 'other.sqlite'}"]
    result = runner.invoke(app, ["cache", "import", str(out), *other])
    assert "imported 1 records" in result.output
    result = runner.invoke(app, ["cache", "prune", "--older-than-days", "0", *other])
    assert "deleted 1 records" in result.output
    result = runner.invoke(app, ["cache", "stats", "--set", f"cache.path={tmp_path / 'missing.sqlite'}"])
    assert result.exit_code != 0 and "No cache at" in str(result.exception)


async def _record(path: Path) -> None:
    async with WebCache(path) as cache:
        upstream = Upstream()
        await search(cache, upstream, "q")
        await search(cache, upstream, "q")


async def test_a_fetched_page_is_recorded_per_extractor(tmp_path: Path) -> None:
    """A page recorded under one extractor is not replayed under the other: each has its own text and record."""
    from deepresearcher.config import FetchConfig
    from deepresearcher.testing.website import LoopbackWebsite
    from deepresearcher.web.environment import LivePageSource
    from deepresearcher.web.fetch import PageFetcher

    html = ("<html><head><title>Larch</title></head><body><nav>Home | About | Contact</nav><article><h1>Larch</h1>"
            + "<p>The Larch Institute was founded in 1911 by Ada Brennan in Varnholt.</p>" * 8
            + "</article><footer>Copyright notice and links</footer></body></html>")
    fetch = FetchConfig(allow_private=True)
    with LoopbackWebsite({"/larch": ("Larch", html)}).running() as site:
        url = site.url("/larch")

        async def read(extractor: str, mode: str) -> str:
            async with WebCache(tmp_path / "pages.sqlite", mode=mode) as cache:
                pages = LivePageSource(PageFetcher(fetch, extractor=extractor), cache)
                try:
                    return (await pages.get(url)).text or ""
                finally:
                    await pages.aclose()

        recorded = {name: await read(name, "readwrite") for name in ("trafilatura", "resiliparse")}
        with WebCache(tmp_path / "pages.sqlite") as cache:
            assert cache.stats().entries == 2  # one record per extractor, not one per URL
        assert recorded["trafilatura"] != recorded["resiliparse"]
    for name, text in recorded.items():  # the site is gone: these come from the recording alone
        assert await read(name, "replay") == text
    async with WebCache(tmp_path / "other.sqlite") as cache:
        pages = LivePageSource(PageFetcher(fetch, extractor="trafilatura"), cache)
        await cache.put("fetch", "http", url, {"extractor": "resiliparse"}, {"url": url, "text": "other extractor"})
        await pages.aclose()
    async with WebCache(tmp_path / "other.sqlite", mode="replay") as cache:
        pages = LivePageSource(PageFetcher(fetch, extractor="trafilatura"), cache)
        with pytest.raises(ReplayMissError):
            await pages.get(url)
        await pages.aclose()
