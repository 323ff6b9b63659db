"""``browse.reader: deepresearcher`` against the original's reading agent, run on the same pages and replies.

The original's ``ReadingAgent.read`` (``scrl/handler/reading_agent/reading_agent.py``) is loaded from the
reference files beside the repository and driven with a recording OpenAI-style client; our reader talks to a
real OpenAI-compatible server on loopback scripted with the same replies. Both must send the same messages
and gather the same ``(page_number, page_summary)`` list.
"""

from __future__ import annotations

import ast
import random
import types
from typing import Any, Dict, List, Optional

import pytest

from deepresearcher.agent.protocols import get_protocol
from deepresearcher.agent.protocols.deepresearcher_tools import _pages
from deepresearcher.config import LLMClientConfig, load_config
from deepresearcher.llm.openai_compat import OpenAIChatClient
from deepresearcher.testing.openai_server import OpenAIEmulator, Reply
from deepresearcher.web.environment import WebEnvironment, make_reader
from deepresearcher.web.reader.base import ReadRequest
from deepresearcher.web.reader.deepresearcher import DeepResearcherReader, split_viewports, tag_content
from deepresearcher.web.reader.deepresearcher_prompts import EXTRACT_NEW_INFO_PROMPT, TEMPERATURE
from deepresearcher.web.types import BrowseResult
from deepresearcher.world import load_tasks

html2text = pytest.importorskip("html2text", reason="needs the paper-reader extra: pip install -e '.[paper-reader]'")

QUESTION = "Which year was the founder of Acme Works born?"
QUERY = "Acme Works founder"
URL = "https://wiki.example/Acme_Works"
VIEWPORT = 400


def tagged(extracted: str, page_down: str, summary: str = "Read this part.") -> str:
    """A reply as qwen-plus writes it for the original prompt: the three tags, blank lines between."""
    return (f"<extracted_info>\n{extracted}\n</extracted_info>\n\n<page_down>{page_down}</page_down>\n\n"
            f"<short_summary>{summary}</short_summary>")


def page_text(paragraphs: int = 9) -> str:
    """Markdown-ish page text with what html2text rewrites: newlines, a list, a table, ``<``, ``&`` and stars."""
    parts = ["# Acme Works", "Acme Works is a *steel* company & foundry in Vesk.", "- founded 1921\n- 400 staff",
             "| year | event |\n|---|---|\n| 1921 | founded |", "Prices rose 3 < 5 times in <b>1930</b>."]
    filler = "The works made rails, bolts and plates for the northern railways. "
    body = [parts[i % len(parts)] + "\n\n" + filler * 2 for i in range(paragraphs)]
    body[paragraphs - 2] += "Alice Brown, the founder, was born in 1901 in Vesk. "
    return "\n\n".join(body)


# --- the original's code, loaded from the reference files -------------------------------------------


def _defs(path, names: set[str]) -> list[ast.stmt]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in names]


@pytest.fixture(scope="module")
def original(reference_path) -> types.SimpleNamespace:
    """The original's ``ReadingAgent``, ``WebPageInfo``, ``PageReadInfo``, ``get_content_from_tag`` and
    ``get_response_from_llm``, with its prompt; their third-party imports given (html2text) or stubbed (the
    OpenAI class and the browser, which appear only in annotations)."""
    import re
    import time

    namespace: dict[str, Any] = {
        "List": List, "Dict": Dict, "Any": Any, "Optional": Optional, "OpenAI": object, "SimpleTextBrowser": object,
        "re": re, "time": time, "html2text": html2text,
    }
    prompts = ast.parse(reference_path("scrl/handler/reading_agent/prompts.py").read_text(encoding="utf-8"))
    body = [n for n in prompts.body if isinstance(n, ast.Assign)]
    body += _defs(reference_path("scrl/handler/utils.py"), {"get_content_from_tag", "get_response_from_llm"})
    body += _defs(reference_path("scrl/handler/webpage.py"), {"PageReadInfo", "WebPageInfo"})
    body += _defs(reference_path("scrl/handler/reading_agent/reading_agent.py"), {"ReadingAgent"})
    exec(compile(ast.Module(body=body, type_ignores=[]), "original", "exec"), namespace)  # noqa: S102
    return types.SimpleNamespace(**namespace)


class RecordingClient:
    """An OpenAI-client stand-in for the original: ``client.chat.completions.create`` records and replies."""

    def __init__(self, replies: list[str]) -> None:
        self.replies, self.calls = list(replies), []
        self.chat = types.SimpleNamespace(completions=self)

    def create(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        message = types.SimpleNamespace(content=self.replies.pop(0))
        return types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)])


class Browser:
    """The original browser's paging as ``ReadingAgent.read`` uses it: viewports of the page text,
    ``_state()[1]`` the current one, and ``page_down`` that stays on the last viewport."""

    def __init__(self, text: str, size: int) -> None:
        self.text, self.viewport_pages, self.viewport_current_page = text, split_viewports(text, size), 0

    def _state(self) -> tuple[str, str]:
        start, end = self.viewport_pages[self.viewport_current_page]
        return "", self.text[start:end]

    def page_down(self) -> None:
        self.viewport_current_page = min(self.viewport_current_page + 1, len(self.viewport_pages) - 1)


def run_original(original, text: str, replies: list[str], earlier: list[list[str]] = (), *, query: str = QUERY,
                 size: int = VIEWPORT) -> tuple[list, list]:
    """The original reading one page of a query's results: the messages it sent and its (page_number, summary)
    list. ``earlier`` holds the summaries earlier reads gathered from other pages of the same query."""
    client = RecordingClient(replies)
    agent = original.ReadingAgent({"reading_agent_model": "qwen-plus"}, client)
    page = original.WebPageInfo("Acme Works", URL, "snippet", query, browser=Browser(text, size))
    context = []
    for i, summaries in enumerate(earlier):
        other = original.WebPageInfo(f"other {i}", f"https://other/{i}", "", query)
        other.page_read_info_list = [original.PageReadInfo(i, other.url, "", "", "", s, n, False)
                                     for n, s in enumerate(summaries)]
        context.append(other)
    agent.read(QUESTION, query, 0, page, context + [page])
    return client.calls, [(info.page_number, info.page_summary) for info in page.page_read_info_list]


async def run_ours(text: str, replies: list[str], earlier: list[list[str]] = ()) -> tuple[list, list, Any]:
    """Our reader on the same page through the loopback server: the request bodies it sent and its notes."""
    notes = ["".join(s + "\n\n" for s in summaries) for summaries in earlier]
    with OpenAIEmulator([Reply(text=r) for r in replies]).running() as server:
        config = LLMClientConfig(kind="openai", base_url=server.base_url, model="qwen-plus", backoff_s=0.01)
        async with OpenAIChatClient(config) as client:
            reader = DeepResearcherReader(client, viewport_chars=VIEWPORT)
            found = await reader.read(ReadRequest(question=QUESTION, url=URL, text=text, query=QUERY, notes=notes))
    return server.requests, found, reader


# --- the tests --------------------------------------------------------------------------------------


def test_prompt_and_temperature_are_the_originals(reference_functions, reference_path) -> None:
    prompts = reference_functions("scrl/handler/reading_agent/prompts.py")
    assert EXTRACT_NEW_INFO_PROMPT == prompts.EXTRACT_NEW_INFO_PROMPT
    (llm_call,) = _defs(reference_path("scrl/handler/utils.py"), {"get_response_from_llm"})
    defaults = dict(zip([a.arg for a in llm_call.args.args][-len(llm_call.args.defaults):], llm_call.args.defaults))
    assert ast.literal_eval(defaults["temperature"]) == TEMPERATURE


@pytest.mark.parametrize(("name", "replies", "earlier"), [
    ("info, page down, nothing, page down, info, stop", [
        tagged("- Acme Works was founded in 1921 in Vesk.", "yes"),
        tagged("", "yes", "Didn't find useful information, will read more"),
        tagged("- Alice Brown, the founder, was born in 1901.", "no")], []),
    ("a capitalised Yes is not yes", [tagged("Founded 1921.", "Yes")], []),
    ("untagged reply: nothing found, stop", ["I think the page is about steel."], []),
    ("unclosed tags and a page_down inside the info", [
        "<extracted_info>Founded 1921 <page_down>yes <short_summary>s", "<extracted_info>Born 1901.</extracted_info>"],
     []),
    ("context from earlier reads of the query's pages", [
        tagged("Founded 1921.", "yes"), tagged("Born 1901.", "no")], [["Vesk is a city.", "It has a port."], []]),
])
async def test_messages_and_pages_equal_the_originals(original, name, replies, earlier) -> None:
    text = page_text()
    assert len(split_viewports(text, VIEWPORT)) >= 3
    sent, extracted = run_original(original, text, replies, earlier)
    bodies, notes, _ = await run_ours(text, replies, earlier)
    assert [b["messages"] for b in bodies] == [c["messages"] for c in sent]
    assert {(b["model"], b["temperature"]) for b in bodies} == {(c["model"], c["temperature"]) for c in sent}
    assert [(n.chunk, n.text) for n in notes] == extracted
    assert _pages(BrowseResult(url=URL, notes=notes)) == extracted  # the toolbox's information entries


async def test_a_multi_page_read_pages_down_then_stops(original) -> None:
    """Three viewports: the model pages down twice and stops; each prompt shows the next page, then the
    gathered info comes back with its page numbers."""
    text = page_text()
    replies = [tagged("Founded 1921.", "yes"), tagged("", "yes"), tagged("Born 1901.", "no")]
    bodies, notes, reader = await run_ours(text, replies)
    prompts = [b["messages"][0]["content"] for b in bodies]
    total = len(split_viewports(text, VIEWPORT))
    assert [f"<page_index>{i}</page_index>\n    <total_page_number>{total}" in p for i, p in enumerate(prompts, 1)] \
        == [True] * 3
    assert "<useful_info>Founded 1921.\n\n</useful_info>" in prompts[2] and "<useful_info>" not in prompts[0]
    assert [(n.chunk, n.text) for n in notes] == [(0, "Founded 1921."), (2, "Born 1901.")]
    assert reader.stats["reads"] == 3


async def test_the_last_page_is_reread_while_the_model_pages_down_then_bounded(original) -> None:
    """page_down yes on the last page re-reads it (as the original's browser did); ``max_reads`` ends it."""
    text = page_text(3)
    pages = len(split_viewports(text, VIEWPORT))
    replies = [tagged("", "yes")] * pages + [tagged("Born 1901.", "no")]
    sent, extracted = run_original(original, text, replies)
    bodies, notes, _ = await run_ours(text, replies)
    assert len(sent) == len(bodies) == pages + 1 and [b["messages"] for b in bodies] == [c["messages"] for c in sent]
    assert [(n.chunk, n.text) for n in notes] == extracted == [(pages - 1, "Born 1901.")]
    with OpenAIEmulator(responder=lambda body: Reply(text=tagged("", "yes"))).running() as server:
        config = LLMClientConfig(kind="openai", base_url=server.base_url, model="m")
        async with OpenAIChatClient(config) as client:
            reader = DeepResearcherReader(client, viewport_chars=VIEWPORT, max_reads=5)
            assert await reader.read(ReadRequest(question=QUESTION, url=URL, text=text, query=QUERY)) == []
    assert len(server.requests) == 5 and reader.stats["stopped_at_max_reads"] == 1


def test_tags_are_read_as_the_original_read_them(original) -> None:
    """The original's ``get_content_from_tag`` and ours agree on 2,000 generated replies."""
    rng = random.Random(0)
    pieces = ["<extracted_info>", "</extracted_info>", "<page_down>", "</page_down>", "<short_summary>", "<b>",
              "</short_summary>", "yes", "no", " Born 1901. ", "\n", "<", ">", "<1>", "</", "info"]
    for _ in range(2000):
        reply = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        for tag in ("extracted_info", "page_down", "short_summary"):
            assert tag_content(reply, tag) == original.get_content_from_tag(reply, tag, "").strip(), (reply, tag)


@pytest.mark.parametrize("size", [1, 7, 64, 400])
def test_viewports_tile_the_text_and_end_on_whitespace(size) -> None:
    text = page_text() + "trailing-word-without-space"
    bounds = split_viewports(text, size)
    assert "".join(text[a:b] for a, b in bounds) == text
    assert all(b - a >= size for a, b in bounds[:-1])
    assert all(text[b - 1] in " \t\r\n" for _, b in bounds[:-1])
    assert all(b - a == size or not any(c in " \t\r\n" for c in text[a + size - 1:b - 1]) for a, b in bounds[:-1])
    assert split_viewports("", size) == [(0, 0)]


def test_viewports_equal_the_original_browsers(reference_path) -> None:
    """Where the reference holds the original's browser (``text_web_browser.py``), its ``_split_pages`` on
    the same text gives the same viewports."""
    path = reference_path("scrl/handler/web_search_agent/search/text_web_browser.py")
    (browser_class,) = _defs(path, {"SimpleTextBrowser"})
    split = next(n for n in browser_class.body if isinstance(n, ast.FunctionDef) and n.name == "_split_pages")
    namespace: dict[str, Any] = {}
    exec(compile(ast.Module(body=[split], type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
    for size in (5, 64, 400):
        text = page_text() + " end"
        browser = types.SimpleNamespace(address="https://x", _page_content=text, viewport_size=size)
        namespace["_split_pages"](browser)
        assert browser.viewport_pages == split_viewports(text, size)


def deepresearcher_config(world_config, server: OpenAIEmulator, **reader_llm: Any):
    settings = {"kind": "openai", "base_url": server.base_url, "model": "qwen-plus", "backoff_s": 0.01,
                "viewport_chars": 2000, **reader_llm}
    return world_config.model_copy(update={
        "browse": world_config.browse.model_copy(update={"reader": "deepresearcher"}),
        "reader_llm": world_config.reader_llm.model_copy(update=settings),
    })


def a_page_url(world_config, small_world) -> str:
    return load_tasks(small_world, "test")[0].evidence_urls[0]


async def test_recorded_reads_replay_without_calls(world_config, small_world) -> None:
    """A read recorded in the cache is served again in replay mode with no call to the endpoint."""
    with OpenAIEmulator(responder=lambda body: Reply(text=tagged("Born 1901.", "no"))).running() as server:
        config = deepresearcher_config(world_config, server)
        env = WebEnvironment.from_config(config)
        try:
            url = a_page_url(world_config, small_world)
            first = await env.browse(QUESTION, [url], queries=[QUERY])
        finally:
            await env.aclose()
        calls = len(server.requests)
        replay = config.model_copy(update={"cache": config.cache.model_copy(update={"mode": "replay"})})
        env = WebEnvironment.from_config(replay)
        try:
            again = await env.browse(QUESTION, [url], queries=[QUERY])
        finally:
            await env.aclose()
    assert calls == 1 and len(server.requests) == calls
    assert again == first and first[0].notes[0].text == "Born 1901."


async def test_a_failing_endpoint_is_an_error_observation(world_config, small_world) -> None:
    """A reader endpoint that answers 500 (after its retries) makes that page an error; nothing raises."""
    with OpenAIEmulator(responder=lambda body: Reply(status=500)).running() as server:
        config = deepresearcher_config(world_config, server, max_retries=1)
        env = WebEnvironment.from_config(config)
        try:
            url = a_page_url(world_config, small_world)
            (result,) = await env.browse(QUESTION, [url], queries=[QUERY])
        finally:
            await env.aclose()
    assert result.error and "500" in result.error and result.notes == []
    assert _pages(result) == []


async def test_the_protocol_reads_each_hit_for_its_query_with_what_that_query_gathered(
        original, world_config, small_world) -> None:
    """Through ``agent.protocol: deepresearcher``'s toolbox: a page is read for the query that found it (not all the
    call's queries), and a later read of another hit of that query starts from what the earlier read gathered,
    in the very message the original would have sent."""
    task = next(t for t in load_tasks(small_world, "test") if t.type == "hop1")
    queries = [task.chain[0].query, "population"]
    reply = tagged("- A fact from this page.", "no")
    with OpenAIEmulator(responder=lambda body: Reply(text=reply)).running() as server:
        config = deepresearcher_config(world_config, server)
        env = WebEnvironment.from_config(config)
        try:
            protocol = get_protocol("deepresearcher")
            toolbox, context = protocol.make_toolbox(env, config), protocol.new_context(QUESTION)
            found = ast.literal_eval((await toolbox.call("web_search", {"query": queries}, context)).text)
            others = {h["url"] for h in found[1]["web_page_info_list"]}
            first, second = [h["url"] for h in found[0]["web_page_info_list"] if h["url"] not in others][:2]
            await toolbox.call("browse_webpage", {"url_list": [first]}, context)
            before = len(server.requests)
            read = ast.literal_eval((await toolbox.call("browse_webpage", {"url_list": [second]}, context)).text)
            text = (await env.read_page(second)).text
        finally:
            await env.aclose()
    sent, _ = run_original(original, text, [reply], [["- A fact from this page."]], query=queries[0], size=2000)
    assert [b["messages"] for b in server.requests[before:]] == [c["messages"] for c in sent]
    assert read == [{"information": [{"page_number": 0, "page_summary": "- A fact from this page."}], "url": second}]


def test_the_config_chooses_it_with_the_originals_sampling_unless_set(world_config) -> None:
    """``browse.reader: deepresearcher`` builds this reader; it samples as the original (0.6, long replies) unless
    ``reader_llm`` sets its own values; the extractive reader stays the default."""
    assert load_config().browse.reader == "extractive"
    with OpenAIEmulator().running() as server:
        plain = make_reader(deepresearcher_config(world_config, server))
        tuned = make_reader(deepresearcher_config(world_config, server, temperature=0.2, max_new_tokens=4096))
    assert isinstance(plain, DeepResearcherReader) and isinstance(tuned, DeepResearcherReader)
    assert (plain.viewport_chars, plain.temperature, plain.max_tokens, plain.client.model) == (
        2000, TEMPERATURE, 8192, "qwen-plus")
    assert (tuned.temperature, tuned.max_tokens) == (0.2, 4096)


async def test_untagged_replies_are_warned_about_once(caplog) -> None:
    """A model that ignores the format finds nothing; the first such reply is a warning, later ones are not."""
    caplog.set_level("DEBUG", logger="deepresearcher.web.reader.deepresearcher")
    with OpenAIEmulator(responder=lambda body: Reply(text="The page is about steel.")).running() as server:
        async with OpenAIChatClient(LLMClientConfig(kind="openai", base_url=server.base_url, model="m")) as client:
            reader = DeepResearcherReader(client, viewport_chars=VIEWPORT)
            for _ in range(3):
                assert await reader.read(ReadRequest(question=QUESTION, url=URL, text=page_text(), query=QUERY)) == []
    assert len(server.requests) == 3 and reader.stats["untagged_replies"] == 3
    assert [r.levelname for r in caplog.records].count("WARNING") == 1
