"""The local search engine: streaming index build, web-API-shaped hits, page store, bad input."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from deepresearcher.errors import IndexNotFoundError
from deepresearcher.web.backends.local import BuildStats, LocalIndex, LocalSearchBackend, build_index, read_corpus
from deepresearcher.world import load_tasks


def _corpus(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_bad_corpus_lines_are_reported_by_number_and_skipped(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "c.jsonl", [
        orjson.dumps({"url": "https://a.example/1", "title": "Zebra facts", "text": "Zebras have stripes."}),
        orjson.dumps({"title": "no url here", "text": "orphan"}),
        b"{not json",
        '{"url": "https://a.example/latin", "title": "Caf\xe9", "text": "caf\xe9 cr\xe8me"}'.encode("latin-1"),
        orjson.dumps({"url": "https://a.example/2", "title": "t"}),
        orjson.dumps({"url": "https://a.example/3", "html": "<html><body><p>Okapis live in forests.</p></body></html>"}),
    ])
    stats = BuildStats()
    build_index(read_corpus(corpus, stats), tmp_path / "index", stats)
    assert stats.documents == 3
    assert [(p.line, p.reason.split(" ")[0]) for p in stats.problems] == [(2, "no"), (3, "not"), (5, "neither")]
    index = LocalIndex(tmp_path / "index")
    assert index.search("zebras", 5)[0].url == "https://a.example/1"
    assert index.search("okapis forests", 5)[0].url == "https://a.example/3"
    assert index.search("café", 5)[0].url == "https://a.example/latin"


def test_hits_look_like_a_web_search_api_with_query_aware_snippets(small_world: Path) -> None:
    index = LocalIndex(small_world / "index", snippet_chars=120)
    task = next(t for t in load_tasks(small_world, "test") if t.type == "hop1")
    hits = index.search(task.chain[0].query, 10)
    assert 1 <= len(hits) <= 10
    assert all(h.title and h.url.startswith("https://") and h.snippet for h in hits)
    assert task.chain[0].subject.split()[0] in hits[0].snippet
    assert all(len(h.snippet) <= 140 for h in hits)


def test_one_hop_evidence_is_in_the_top_three_for_the_natural_query(small_world: Path) -> None:
    index = LocalIndex(small_world / "index")
    tasks = [t for t in load_tasks(small_world, "test") + load_tasks(small_world, "dev") if t.type == "hop1"]
    found = [any(h.url in t.evidence_urls for h in index.search(t.chain[0].query, 3)) for t in tasks]
    assert len(tasks) > 100
    assert sum(found) / len(found) >= 0.90


def test_queries_of_any_text_never_raise(small_world: Path) -> None:
    index = LocalIndex(small_world / "index")
    assert index.search("", 10) == []
    assert index.search("   !!! ??? ", 10) == []
    assert isinstance(index.search('title:"unclosed AND (OR', 10), list)
    assert index.search("population", 0) == []


def test_page_store_returns_stored_html_and_tolerates_url_variants(small_world: Path) -> None:
    index = LocalIndex(small_world / "index")
    url = index.search("population", 1)[0].url
    assert index.get_page(url).html.startswith("<!DOCTYPE html>")
    assert index.get_page(url + "#history").url == url
    assert index.get_page("https://nowhere.example/") is None


def test_missing_index_says_how_to_build_one(tmp_path: Path) -> None:
    with pytest.raises(IndexNotFoundError, match="deepresearcher index build"):
        LocalIndex(tmp_path / "nothing")


def test_giant_page_is_indexed_with_bounded_text(tmp_path: Path) -> None:
    """A 50 MB page is cut before extraction and indexing instead of exhausting memory or time."""
    big = "<html><body><p>needle at the start</p><p>" + "filler " * 7_500_000 + "</p></body></html>"
    stats = build_index(iter([{"url": "https://big.example/", "title": "Big", "html": big}]), tmp_path / "i")
    assert stats.documents == 1
    index = LocalIndex(tmp_path / "i")
    assert index.search("needle", 1)[0].url == "https://big.example/"
    assert len(index.get_page("https://big.example/").html) <= 5_000_000


async def test_backend_protocol(small_world: Path) -> None:
    backend = LocalSearchBackend(small_world / "index")
    hits = await backend.search("population census", 3)
    assert len(hits) == 3
    await backend.aclose()


def test_accents_are_folded_in_search_and_snippets(tmp_path: Path) -> None:
    """A page about the Café Zürich is found by "cafe zurich" (and by "Café"), its snippet marks the words;
    an ASCII page is found by an accented query."""
    docs = [
        {"url": "https://a.example/cafe", "title": "Café Zürich",
         "text": "The Café Zürich opened on the Limmat quay in 1893 and still serves coffee."},
        {"url": "https://a.example/tea", "title": "Tea house", "text": "A tea house near the station."},
        {"url": "https://a.example/resume", "title": "Resume", "text": "How to write a resume."},
    ]
    build_index(iter(docs), tmp_path / "i")
    index = LocalIndex(tmp_path / "i")
    for query in ("cafe zurich", "Café Zürich", "CAFE"):
        hits = index.search(query, 3)
        assert hits and hits[0].url == "https://a.example/cafe", query
    assert "Zürich" in index.search("zurich", 1)[0].snippet
    assert index.search("résumé", 1)[0].url == "https://a.example/resume"


def test_an_index_of_an_older_format_is_refused_with_the_rebuild_command(tmp_path: Path) -> None:
    """An index written before accent folding (no format in its metadata) would silently miss accented
    words; it is refused, naming the command that rebuilds it."""
    build_index(iter([{"url": "https://a.example/", "title": "A", "text": "alpha"}]), tmp_path / "i")
    meta = tmp_path / "i" / "deepresearcher-index.json"
    meta.write_bytes(orjson.dumps({k: v for k, v in orjson.loads(meta.read_bytes()).items() if k != "format"}))
    with pytest.raises(IndexNotFoundError, match=r"format 1; .* reads format 2 .*deepresearcher index build"):
        LocalIndex(tmp_path / "i")


def test_the_default_world_rebuilds_an_index_of_an_older_format(tmp_path: Path) -> None:
    from deepresearcher.config import load_config
    from deepresearcher.web.local_world import ensure_world

    config = load_config(overrides=[f"cache_dir={tmp_path}", "world.size=tiny"])
    meta = ensure_world(config) / "index" / "deepresearcher-index.json"
    meta.write_bytes(orjson.dumps({"documents": 1, "skipped": 0}))  # as written before formats
    assert LocalIndex(ensure_world(config) / "index").search("population", 1)
    assert orjson.loads(meta.read_bytes())["format"] == 2
