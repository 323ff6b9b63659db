"""The retriever API both ways, on loopback: Search-R1's client against our ``/retrieve`` and ``/access``,
and our ``retriever`` backend against a server answering as Search-R1's ``retrieval_server.py`` does
(and against our own ``serve``)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import requests

from deepresearcher.config import Config
from deepresearcher.testing.emulators import Fault, SearchEmulator
from deepresearcher.testing.handlers import handler_thread
from deepresearcher.web.backends.local import LocalIndex
from deepresearcher.web.backends.local_build import build_index, read_corpus
from deepresearcher.web.environment import WebEnvironment
from deepresearcher.web.server import create_app

# wiki-18's line format: {"id", "contents": "\"Title\"\ntext"}; every passage mentions "the".
WIKI = [
    {"id": "0", "contents": '"Paris"\nParis is the capital and largest city of France.'},
    {"id": "1", "contents": '"Okapi"\nThe okapi lives in the rainforests of the Congo.'},
    {"id": "2", "contents": '"Lyon"\nLyon is the third-largest city of France, on the Rhone.'},
    {"id": "3", "contents": '"Zebra"\nThe zebra is an African equine with black-and-white stripes.'},
    {"id": "4", "contents": '"Dune (novel)"\nDune is the 1965 novel by Frank Herbert.'},
]


def _search_r1_passages(result: list[dict]) -> str:
    """Search-R1's ``_passages2string``: how their rollout turns our answer into the policy's observation."""
    out = ""
    for idx, item in enumerate(result):
        content = item["document"]["contents"]
        out += f"Doc {idx + 1}(Title: {content.split(chr(10))[0]}) {chr(10).join(content.split(chr(10))[1:])}\n"
    return out


@pytest.fixture(scope="module")
def wiki_index(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("wiki")
    (root / "wiki-18.jsonl").write_bytes(b"\n".join(orjson.dumps(d) for d in WIKI) + b"\n")
    build_index(read_corpus(root / "wiki-18.jsonl"), root / "index")
    return root / "index"


@pytest.fixture
def local_config(wiki_index, tmp_path) -> Config:
    return Config.model_validate({"search": {"index": str(wiki_index), "top_k": 2}, "serve": {"max_retrieve_queries": 4},
                                  "cache_dir": str(tmp_path / "cache")})


def test_search_r1_client_reads_our_local_index(local_config):
    """Their request (batch, topk, return_scores) gets their answer: full passages in the corpus's own
    format and ids, BM25 scores best first, an empty list for an empty query, in query order."""
    payload = {"queries": ["capital of France", "okapi Congo", ""], "topk": 3, "return_scores": True}
    with handler_thread(create_app(local_config)) as url:
        result = requests.post(url + "/retrieve", json=payload).json()["result"]
    france, okapi, empty = result
    assert [d["document"]["id"] for d in france][:2] == ["0", "2"]
    assert france[0]["document"]["contents"] == WIKI[0]["contents"], "contents must round-trip exactly"
    scores = [d["score"] for d in france]
    assert scores == sorted(scores, reverse=True) and all(isinstance(s, float) and s > 0 for s in scores)
    assert okapi[0]["document"]["id"] == "1" and empty == []
    assert _search_r1_passages(okapi).startswith('Doc 1(Title: "Okapi") The okapi lives in the rainforests')


def test_topk_defaults_bounds_and_bare_documents(local_config):
    """topk above the index size returns every match; missing or 0 means search.top_k; without
    return_scores the documents come bare (with the url ASearcher's client reads)."""
    with handler_thread(create_app(local_config)) as url:
        everything = requests.post(url + "/retrieve", json={"queries": ["the"], "topk": 50_000}).json()["result"][0]
        default = requests.post(url + "/retrieve", json={"queries": ["the", "France"], "topk": 0}).json()["result"]
        bare = requests.post(url + "/retrieve", json={"queries": ["zebra"], "extra": 1}).json()["result"][0]
        no_queries = requests.post(url + "/retrieve", json={"queries": []}).json()
    assert sorted(d["id"] for d in everything) == ["0", "1", "2", "3", "4"]
    assert [len(r) for r in default] == [2, 2]
    assert bare[0] == {"id": "3", "contents": WIKI[3]["contents"], "title": "Zebra", "url": "3"}
    assert no_queries == {"result": []}


def test_bad_retrieve_bodies_get_clear_4xx(local_config):
    with handler_thread(create_app(local_config)) as url:
        wrong = requests.post(url + "/retrieve", json={"queries": "not a list"})
        too_many = requests.post(url + "/retrieve", json={"queries": ["a"] * 5})
        negative = requests.post(url + "/retrieve", json={"queries": ["a"], "topk": -1})
    assert wrong.status_code == 422 and "queries" in wrong.json()["error"]["message"]
    assert too_many.status_code == 422 and "serve.max_retrieve_queries" in too_many.json()["error"]["message"]
    assert negative.status_code == 422 and "topk" in negative.json()["error"]["message"]


def test_access_returns_pages_by_url_and_null_when_unknown(local_config):
    with handler_thread(create_app(local_config)) as url:
        result = requests.post(url + "/access", json={"urls": ["4", "https://nowhere.example/"]}).json()["result"]
    assert result[0] == {"url": "4", "title": "Dune (novel)", "contents": "Dune is the 1965 novel by Frank Herbert."}
    assert result[1] is None


def test_retrieve_through_live_backend_cache_and_a_failing_upstream(web, tmp_path):
    """Through Serper (the loopback emulator): hits become documents scored by reciprocal rank, a repeated
    batch is served from the cache, and a query whose upstream answers 500 gets an empty list, not a 5xx."""
    config = web.config(tmp_path / "cache.sqlite")
    config.backends.serper.retries = 1
    with handler_thread(create_app(config)) as url:
        body = {"queries": ["Hyport population", "Grirstan"], "topk": 3, "return_scores": True}
        first = requests.post(url + "/retrieve", json=body).json()["result"]
        calls = web.search.calls
        again = requests.post(url + "/retrieve", json=body).json()["result"]
        cached = web.search.calls == calls
        web.search.fail_always(Fault(500))
        try:
            failed = requests.post(url + "/retrieve", json={"queries": ["never asked before"], "return_scores": True})
        finally:
            web.search.fail_always(None)
    assert [len(r) for r in first] == [3, 3] and again == first and cached
    assert [d["score"] for d in first[0]] == [1.0, 0.5, pytest.approx(1 / 3)]
    assert first[0][0]["document"]["url"].startswith(web.site.base_url)
    assert first[0][0]["document"]["contents"].startswith('"')
    assert failed.status_code == 200 and failed.json() == {"result": [[]]}


def _retriever_config(base_url: str, tmp_path: Path) -> Config:
    return Config.model_validate({
        "search": {"backend": "retriever"},
        "backends": {"retriever": {"base_url": base_url, "retries": 1, "backoff_s": 0.01, "breaker_failures": 100}},
        "cache": {"path": str(tmp_path / "cache.sqlite"), "mode": "readwrite"},
    })


async def test_retriever_backend_reads_a_search_r1_server(tmp_path):
    """Batch queries, topk above the corpus size, an empty query, the cache, one 500 retried, a dead server."""
    docs = [{"id": d["id"], "title": d["contents"].split("\n")[0].strip('"'), "text": d["contents"].split("\n")[1]}
            for d in WIKI]
    with SearchEmulator(docs, flavor="search-r1").running() as server:
        env = WebEnvironment.from_config(_retriever_config(server.base_url, tmp_path))
        try:
            france, everything, empty = await env.search(["capital of France", "the", ""], 50)
            assert france.error is None and france.hits[0].title == "Paris" and france.hits[0].url == "0"
            assert france.hits[0].snippet == "Paris is the capital and largest city of France."
            assert len(everything.hits) == 5 and empty.hits == [] and empty.error is None
            calls = server.calls
            assert (await env.search(["capital of France"], 50))[0].hits == france.hits
            assert server.calls == calls, "a repeated query reached the retrieval server"

            server.script(Fault(500))
            okapi = (await env.search(["okapi"], 3))[0]
            assert okapi.hits[0].title == "Okapi" and server.calls == calls + 2

            server.fail_always(Fault(500))
            dead = (await env.search(["zebra stripes"], 3))[0]
            assert dead.hits == [] and "HTTP 500" in dead.error
        finally:
            await env.aclose()


async def test_retriever_backend_against_our_own_serve(local_config, wiki_index, tmp_path):
    """Our agent on our server: the retriever backend gets the local index's own ranking over /retrieve."""
    with handler_thread(create_app(local_config)) as url:
        env = WebEnvironment.from_config(_retriever_config(url, tmp_path))
        try:
            (result,) = await env.search(["largest city of France"], 3)
        finally:
            await env.aclose()
    expected = LocalIndex(wiki_index).passages("largest city of France", 3)
    assert [(h.url, h.title, h.snippet) for h in result.hits] == [(p.id, p.title, p.text) for p in expected]


async def test_a_retriever_hit_is_browsable(tmp_path):
    """Browsing a hit returns its passage (the agent reads what it found); an id the session never saw is
    a clear page error on a server without /access, never a fetch of a scheme-less URL."""
    from deepresearcher.errors import PageError

    docs = [{"id": d["id"], "title": d["contents"].split("\n")[0].strip('"'), "text": d["contents"].split("\n")[1]}
            for d in WIKI]
    with SearchEmulator(docs, flavor="search-r1").running() as server:
        env = WebEnvironment.from_config(_retriever_config(server.base_url, tmp_path))
        try:
            (okapi,) = await env.search(["okapi"], 2)
            page = await env.read_page(okapi.hits[0].url)
            assert (page.url, page.title, page.text) == ("1", "Okapi", "The okapi lives in the rainforests of the Congo.")
            [read] = await env.browse("Where does the okapi live?", [okapi.hits[0].url])
            assert read.error is None and "Congo" in " ".join(n.text for n in read.notes)
            with pytest.raises(PageError, match="not a passage a search returned"):
                await env.read_page("3")
        finally:
            await env.aclose()


async def test_a_fresh_session_browses_a_passage_of_our_serve_by_id(local_config, tmp_path):
    """`deepresearcher browse ID` in a new process: the id is looked up with the server's /access."""
    with handler_thread(create_app(local_config)) as url:
        env = WebEnvironment.from_config(_retriever_config(url, tmp_path))
        try:
            page = await env.read_page("4")
        finally:
            await env.aclose()
    assert (page.title, page.text) == ("Dune (novel)", "Dune is the 1965 novel by Frank Herbert.")


def test_a_document_without_id_or_url_gets_a_stable_browsable_name():
    from deepresearcher.web.backends.retriever import _hit

    first = _hit({"document": {"contents": '"Okapi"\nThe okapi lives in the Congo.'}, "score": 1.0})
    again = _hit({"contents": '"Okapi"\nThe okapi lives in the Congo.'})
    other = _hit({"contents": '"Zebra"\nStripes.', "id": ""})
    assert first.url == again.url and first.url.startswith("retriever:") and other.url != first.url


def test_search_r1_batches_are_answered_by_default(wiki_index, tmp_path):
    """Their client sends a turn's whole batch in one request: 512 prompts x 5 rollouts = 2,560 queries."""
    config = Config.model_validate({"search": {"index": str(wiki_index)}, "cache_dir": str(tmp_path / "cache")})
    queries = [["capital of France", "okapi", "novel by Frank Herbert", "zebra stripes"][i % 4] for i in range(2560)]
    with handler_thread(create_app(config)) as url:
        answer = requests.post(url + "/retrieve", json={"queries": queries, "topk": 3, "return_scores": True})
    assert answer.status_code == 200
    result = answer.json()["result"]
    assert len(result) == 2560 and result[1][0]["document"]["id"] == "1" and result[2559][0]["document"]["id"] == "3"


AWKWARD = [  # contents as corpora have them, which /retrieve must give back unchanged
    {"id": "q", "contents": '"The "Quoted" Title"\nA passage about quoted marmots.'},
    {"id": "s", "contents": '  "Spaced"  \n  A passage about spaced marmots, with trailing spaces.  '},
    {"id": "u", "contents": "An untitled passage about marmots, with no title line."},
    {"id": "e", "contents": '"Empty text"\n'},
    {"id": "t", "contents": '"Tabs"\nA passage\tabout\n\nmarmots on two lines.'},
]


def test_contents_come_back_byte_for_byte(tmp_path):
    root = tmp_path / "awkward"
    root.mkdir()
    (root / "corpus.jsonl").write_bytes(b"\n".join(orjson.dumps(d) for d in AWKWARD + WIKI) + b"\n")
    build_index(read_corpus(root / "corpus.jsonl"), root / "index")
    config = Config.model_validate({"search": {"index": str(root / "index")}, "cache_dir": str(tmp_path / "cache")})
    with handler_thread(create_app(config)) as url:
        found = requests.post(url + "/retrieve", json={"queries": ["marmots", "Empty text"], "topk": 10}).json()["result"]
        pages = requests.post(url + "/access", json={"urls": ["q", "u"]}).json()["result"]
    returned = {d["id"]: d["contents"] for group in found for d in group}
    assert returned == {d["id"]: d["contents"] for d in AWKWARD}
    assert pages[0]["title"] == 'The "Quoted" Title' and pages[1]["contents"].startswith("An untitled passage")
