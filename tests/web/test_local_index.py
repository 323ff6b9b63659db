"""The local search engine: streaming index build, web-API-shaped hits, page store, bad input."""

from __future__ import annotations

import itertools
import random
import string
from pathlib import Path

import orjson
import pytest
import tantivy

from deepresearcher.errors import IndexNotFoundError
from deepresearcher.web.backends.body_codec import DICTIONARY_FILE
from deepresearcher.web.backends.local import INDEX_FORMAT, LocalIndex, LocalSearchBackend
from deepresearcher.web.backends.local_build import BuildStats, build_index, read_corpus, resume_point
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
    with pytest.raises(IndexNotFoundError, match=r"format 1; .* reads formats 3-4 .*deepresearcher index build"):
        LocalIndex(tmp_path / "i")


def test_the_default_world_rebuilds_an_index_of_an_older_format(tmp_path: Path) -> None:
    from deepresearcher.config import load_config
    from deepresearcher.web.local_world import ensure_world

    config = load_config(overrides=[f"cache_dir={tmp_path}", "world.size=tiny"])
    meta = ensure_world(config) / "index" / "deepresearcher-index.json"
    meta.write_bytes(orjson.dumps({"documents": 1, "skipped": 0}))  # as written before formats
    assert LocalIndex(ensure_world(config) / "index").search("population", 1)
    assert orjson.loads(meta.read_bytes())["format"] == INDEX_FORMAT


def _wiki_corpus(path: Path, n: int) -> Path:
    """n passages in Search-R1's wiki-18 line format; passage i says "marker<i>"."""
    lines = [orjson.dumps({"id": str(i), "contents": f'"Passage {i}"\nmarker{i} is in passage number {i}.'})
             for i in range(n)]
    return _corpus(path, lines)


def test_wiki18_lines_index_with_their_ids_titles_and_text(tmp_path: Path) -> None:
    corpus = _wiki_corpus(tmp_path / "wiki-18.jsonl", 3)
    build_index(read_corpus(corpus), tmp_path / "index")
    index = LocalIndex(tmp_path / "index")
    (passage,) = index.passages("marker1", 1)
    assert (passage.id, passage.title, passage.text) == ("1", "Passage 1", "marker1 is in passage number 1.")
    assert passage.contents == '"Passage 1"\nmarker1 is in passage number 1.'
    assert index.get_page("2").text == "marker2 is in passage number 2."


def test_an_interrupted_build_resumes_from_its_last_commit(tmp_path: Path) -> None:
    """A build killed after 2,500 documents (commits every 1,000) resumes at line 2,001 and ends with
    every passage exactly once."""
    corpus = _wiki_corpus(tmp_path / "wiki-18.jsonl", 5000)

    def crash_after(docs, n):
        for i, doc in enumerate(docs):
            if i == n:
                raise KeyboardInterrupt
            yield doc

    stats = BuildStats()
    with pytest.raises(KeyboardInterrupt):
        build_index(crash_after(read_corpus(corpus, stats), 2500), tmp_path / "index", stats, corpus=corpus,
                    commit_every=1000)
    with pytest.raises(IndexNotFoundError, match="--resume"):
        LocalIndex(tmp_path / "index")  # an unfinished index is never served
    resumed = resume_point(tmp_path / "index", corpus)
    assert (resumed.documents, resumed.lines) == (2000, 2000)
    assert resume_point(tmp_path / "index", _wiki_corpus(tmp_path / "other.jsonl", 10)) is None

    build_index(read_corpus(corpus, resumed), tmp_path / "index", resumed, resume=True, corpus=corpus,
                commit_every=1000)
    index = LocalIndex(tmp_path / "index")
    assert index.num_docs == 5000 and resumed.documents == 5000
    for i in (0, 1999, 2000, 2499, 2500, 4999):
        assert [p.id for p in index.passages(f"marker{i}", 3)] == [str(i)]
    assert resume_point(tmp_path / "index", corpus) is None  # a finished build leaves no checkpoint


def test_words_in_most_documents_are_left_out_of_a_query_with_rarer_words(tmp_path: Path) -> None:
    """"the" is in every document: with a rare word beside it, only the rare word is searched (one hit, not
    ten); alone, or beside words no document has, it is searched as is."""
    docs = [{"url": f"https://a.example/{i}", "title": f"Page {i}",
             "text": "the " + ("zebra stripes" if i == 7 else f"filler number {i}")} for i in range(50)]
    build_index(iter(docs), tmp_path / "index")
    index = LocalIndex(tmp_path / "index")
    assert [h.url for h in index.search("the zebra", 10)] == ["https://a.example/7"]
    assert len(index.search("the", 10)) == 10
    assert len(index.search("the okapi", 10)) == 10, "a rarer word that no document has drops nothing"


def _zipf_docs(n: int, seed: int = 0) -> list[dict]:
    """n short passages of Zipf-distributed words with two-word titles, like the search benchmark's corpus."""
    import random

    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(5000)]
    weights = [1 / (i + 1) ** 1.07 for i in range(len(vocab))]
    return [{"url": f"https://z.example/{i}", "title": " ".join(rng.choices(vocab, weights, k=2)),
             "text": " ".join(rng.choices(vocab, weights, k=40))} for i in range(n)]


def _hits(found) -> list[tuple[float, int, int]]:
    return [(score, address.segment_ord, address.doc) for score, address in found]


@pytest.mark.parametrize("generator_min_docs", [1, 50])
def test_the_driven_top_k_equals_the_whole_query(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 generator_min_docs: int) -> None:
    """Queries of frequent words plus a rarer one, as in the benchmark: ``top`` (candidates from the terms
    with the highest best scores, proven or completed by a second pass) returns exactly the whole query's
    hits and scores, and each of its ways to answer is taken; with few candidates (1 x k documents) and
    with as many as on a wiki-size index."""
    import random

    from deepresearcher.web.backends import local

    monkeypatch.setattr(local, "DRIVEN_MIN_DOCS", 0)  # small indexes answer with the whole query
    monkeypatch.setattr(local, "GENERATOR_MIN_DOCS", generator_min_docs)

    build_index(iter(_zipf_docs(3000)), tmp_path / "index")
    index = LocalIndex(tmp_path / "index")
    rng = random.Random(1)
    queries = [" ".join(f"w{rng.randrange(10, 200)}" for _ in range(rng.randint(2, 4))) + f" w{rng.randrange(200, 5000)}"
               for _ in range(300)]
    queries += ["w3", "w5 w5 w7", "w3 nowhere", "nowhere w250", "W3 w9!", "w1 w2 w3 w4 w5 w6 w7 w8 w9 w10"]
    for query in queries:
        assert _hits(index.top(query, 10)[1]) == _hits(index.top_whole(query, 10)[1]), query
    assert index.top_paths["driven"] > 30 and index.top_paths["driven+second"] > 30 and index.top_paths["whole"] > 0
    whole = LocalIndex(tmp_path / "index", driven=False)
    assert [p.url for p in whole.passages(queries[0], 10)] == [p.url for p in index.passages(queries[0], 10)]
    assert [h.snippet for h in whole.search(queries[0], 10)] == [h.snippet for h in index.search(queries[0], 10)]
    assert set(whole.top_paths) == {"whole"}


def test_the_driven_top_k_finds_pages_without_the_rarest_word_or_a_title_match(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page with both frequent words four times outscores the long pages that have the rarer word once:
    the second pass finds it although the rarer word is not in it and no query word is in its title. A
    rarest word on fewer than k pages still leaves k hits."""
    from deepresearcher.web.backends import local

    monkeypatch.setattr(local, "DRIVEN_MIN_DOCS", 0)
    docs = [{"url": f"https://a.example/{i}", "title": f"Page {i}", "text": f"filler{i} " + "words " * 40}
            for i in range(400)]
    for i in range(30):  # 31 pages each with the "both" page: under COMMON_WORD_FRACTION
        docs[i]["text"] += " alpha"
        docs[40 + i]["text"] += " beta"
    for i in range(12):
        docs[100 + i]["text"] += " okapi"
    docs[200]["text"] += " zebra"
    docs.append({"url": "https://a.example/both", "title": "Both", "text": "alpha alpha alpha alpha beta beta beta beta"})
    build_index(iter(docs), tmp_path / "index")
    index = LocalIndex(tmp_path / "index")
    hits = index.search("alpha beta okapi", 10)
    assert len(hits) == 10 and hits[0].url == "https://a.example/both"
    assert index.top_paths == {"driven+second": 1}
    assert _hits(index.top("alpha beta okapi", 10)[1]) == _hits(index.top_whole("alpha beta okapi", 10)[1])
    hits = index.search("alpha beta zebra", 10)
    assert len(hits) == 10 and {"https://a.example/both", "https://a.example/200"} <= {h.url for h in hits}


def test_the_driven_top_k_finds_a_page_by_a_title_word_outside_the_candidates(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Candidates are the pages titled with the rare word (the highest-scoring term alone); the best page is
    titled with the frequent word and has the other word in its body many times: only the second pass's
    intersection of a title list with a body list can find it."""
    from deepresearcher.web.backends import local

    monkeypatch.setattr(local, "DRIVEN_MIN_DOCS", 0)
    monkeypatch.setattr(local, "GENERATOR_MIN_DOCS", 1)
    docs = [{"url": f"https://a.example/{i}", "title": f"Page {i}", "text": f"filler{i} " + "words " * 40}
            for i in range(400)]
    for i in range(30):
        docs[i]["title"] = f"Alpha {i}"
        docs[40 + i]["text"] += " beta"
    for i in range(12):
        docs[100 + i]["title"] = f"Zebra {i}"
    docs.append({"url": "https://a.example/best", "title": "Alpha", "text": "beta beta beta beta beta"})
    build_index(iter(docs), tmp_path / "index")
    index = LocalIndex(tmp_path / "index")
    found = index.top("alpha beta zebra", 10)[1]
    assert index.top_paths == {"driven+second": 1}
    assert _hits(found) == _hits(index.top_whole("alpha beta zebra", 10)[1])
    assert index.search("alpha beta zebra", 1)[0].url == "https://a.example/best"


def test_the_build_records_frequent_words_best_scores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bounds ``top`` proves its top-k with are each term's best score: recorded at build for words in at
    least MAX_SCORE_MIN_DOCS bodies and TITLE_SCORE_MIN_DOCS titles, equal to a search for the term alone (the
    title boosted); an index with a body-only record, or none (built before them), answers the same."""
    from deepresearcher.web.backends import local, local_build

    monkeypatch.setattr(local_build, "MAX_SCORE_MIN_DOCS", 50)
    monkeypatch.setattr(local_build, "TITLE_SCORE_MIN_DOCS", 20)
    monkeypatch.setattr(local, "DRIVEN_MIN_DOCS", 0)
    build_index(iter(_zipf_docs(1500)), tmp_path / "index")
    scores_file = tmp_path / "index" / local.MAX_SCORES_FILE
    recorded = orjson.loads(scores_file.read_bytes())
    index = LocalIndex(tmp_path / "index")
    bodies = {f"w{i}": index._searcher.doc_freq("body", f"w{i}") for i in range(5000)}
    titles = {f"w{i}": index._searcher.doc_freq("title", f"w{i}") for i in range(5000)}
    assert set(recorded["body"]) == {w for w, n in bodies.items() if 50 <= n <= 150} and len(recorded["body"]) > 20
    assert set(recorded["title"]) == {w for w, n in titles.items() if n >= 20} and len(recorded["title"]) > 5
    for word, score in recorded["body"].items():
        assert score == index._searcher.search(local._term(index._schema, "body", word), 1).hits[0][0]
    for word, score in recorded["title"].items():
        title = tantivy.Query.boost_query(local._term(index._schema, "title", word), local.TITLE_BOOST)
        assert score == index._searcher.search(title, 1).hits[0][0]
    queries = ["w12 w25 w38 w1200", "w1 w3 w5 w900", "w2 w4 w3000"]
    expected = [_hits(index.top(query, 10)[1]) for query in queries]
    scores_file.write_bytes(orjson.dumps(recorded["body"]))  # the record of an index built before titles were
    assert [_hits(LocalIndex(tmp_path / "index").top(query, 10)[1]) for query in queries] == expected
    scores_file.unlink()
    assert [_hits(LocalIndex(tmp_path / "index").top(query, 10)[1]) for query in queries] == expected


def _zipf_corpus(path: Path, n: int, seed: int = 0) -> tuple[Path, list[str]]:
    """n wiki-18 lines of 100 words drawn Zipf-like from 200,000 random words (as `bench search` generates)."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 11))) for _ in range(200_000)]
    zipf = list(itertools.accumulate(1 / (rank + 1) ** 1.07 for rank in range(len(vocab))))
    texts = [" ".join(rng.choices(vocab, cum_weights=zipf, k=100)) for _ in range(n)]
    lines = [orjson.dumps({"id": str(i), "contents": f'"Passage {i}"\n{text}'}) for i, text in enumerate(texts)]
    return _corpus(path, lines), texts


def test_bodies_are_stored_compressed_and_the_index_is_smaller_than_the_corpus(tmp_path: Path) -> None:
    """tantivy's LZ4 doc store barely compresses short passages (the index was 1.13x a wiki-size corpus);
    bodies stored as zstd frames with a dictionary trained on the corpus make it smaller than the corpus,
    and come back exactly."""
    corpus, texts = _zipf_corpus(tmp_path / "wiki.jsonl", 3000)
    build_index(read_corpus(corpus), tmp_path / "index")
    assert (tmp_path / "index" / DICTIONARY_FILE).stat().st_size > 10_000
    index_bytes = sum(f.stat().st_size for f in (tmp_path / "index").iterdir())
    assert index_bytes < 0.95 * corpus.stat().st_size
    index = LocalIndex(tmp_path / "index")
    for i in (0, 1234, 2999):
        assert index.get_page(str(i)).text == texts[i]
        (hit,) = [h for h in index.search(" ".join(texts[i].split()[-5:]), 10) if h.url == str(i)]
        assert hit.snippet and all(word in texts[i] for word in hit.snippet.split())


def test_a_small_corpus_is_stored_without_a_dictionary(tmp_path: Path) -> None:
    """Too few bodies to train a dictionary on: plain zstd frames, read back the same."""
    corpus, texts = _zipf_corpus(tmp_path / "wiki.jsonl", 20)
    build_index(read_corpus(corpus), tmp_path / "index")
    assert not (tmp_path / "index" / DICTIONARY_FILE).exists()
    assert LocalIndex(tmp_path / "index").passages(texts[7].split()[3] + " " + texts[7].split()[9], 20)[0].text in texts


def test_an_index_of_format_3_with_bodies_in_the_doc_store_is_still_read(tmp_path: Path) -> None:
    """Indexes built before bodies were compressed (format 3, a 20-minute build at wiki size) are read as
    they are, without a rebuild."""
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("url", stored=True, tokenizer_name="raw", index_option="basic")
    for name in ("title", "body"):
        builder.add_text_field(name, stored=True, tokenizer_name="deepresearcher_folded", index_option="freq")
    builder.add_bytes_field("html", stored=True, indexed=False)
    index = tantivy.Index(builder.build(), path=str(tmp_path))
    index.register_tokenizer("deepresearcher_folded", tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
                             .filter(tantivy.Filter.lowercase()).build())
    writer = index.writer(heap_size=50_000_000, num_threads=1)
    writer.add_document(tantivy.Document(url="https://a.example/z", title="Zebras", body="Zebras have stripes."))
    writer.commit()
    writer.wait_merging_threads()
    (tmp_path / "deepresearcher-index.json").write_bytes(orjson.dumps({"format": 3, "documents": 1}))
    local = LocalIndex(tmp_path)
    assert local.get_page("https://a.example/z").text == "Zebras have stripes."
    assert local.search("stripes", 1)[0].snippet == "Zebras have stripes"  # the fragment around the match


def test_preload_reads_the_postings_then_the_store_while_they_fit_in_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``preload`` reads every posting, term dictionary and field norm file, then the document store, each
    only while what it read fits in its share of the memory; queries answer the same."""
    import os

    from deepresearcher.web.backends import local

    build_index(iter(_zipf_docs(500)), tmp_path / "index")
    index = LocalIndex(tmp_path / "index")
    before = _hits(index.top("w3 w40 w900", 10)[1])
    files = list((tmp_path / "index").iterdir())
    postings = sum(p.stat().st_size for p in files if p.suffix in (".idx", ".term", ".fieldnorm"))
    store = sum(p.stat().st_size for p in files if p.suffix == ".store")
    assert postings > 0 and store > 0
    assert index.preload() == postings + store
    assert _mapped(index) == postings + store  # kept mapped while the index is open (see local._Resident)
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    monkeypatch.setattr(local, "PRELOAD_MAX_MEMORY_SHARE", (postings + store / 2) / memory)
    assert index.preload() == postings, "the store does not fit beside the postings"
    assert _mapped(index) == postings, "a second preload replaces the first's mappings"
    monkeypatch.setattr(local, "PRELOAD_MAX_MEMORY_SHARE", postings / 2 / memory)
    assert index.preload() == 0
    assert _mapped(index) == 0
    assert _hits(index.top("w3 w40 w900", 10)[1]) == before


def _mapped(index: LocalIndex) -> int:
    """Bytes of the index's files that ``preload`` holds mapped."""
    return sum(len(m) for resident in index._resident for m in resident.maps)
