"""The two tools through a real environment: observation formats, limits, and every bad input."""

from __future__ import annotations

import orjson
import pytest

from deepresearcher.agent.tools import TOOL_NAMES, ToolBox, ToolContext
from deepresearcher.web.environment import WebEnvironment
from deepresearcher.world import load_tasks


@pytest.fixture
async def toolbox(world_config):
    env = WebEnvironment.from_config(world_config)
    yield ToolBox(env, world_config)
    await env.aclose()


async def test_web_search_runs_the_first_k_queries_in_the_papers_format(toolbox, small_world) -> None:
    context = ToolContext("q")
    outcome = await toolbox.call("web_search", {"query": ["population", "census", "founder", "birthplace"]}, context)
    observation = orjson.loads(outcome.text)
    assert outcome.error is None
    assert [r["search_query"] for r in observation] == ["population", "census", "founder"]
    for result in observation:
        assert 1 <= len(result["web_page_info_list"]) <= 10
        assert set(result["web_page_info_list"][0]) == {"title", "url", "quick_summary"}
    assert context.queries == ["population", "census", "founder"]
    assert observation[0]["web_page_info_list"][0]["url"] in context.searched_urls


async def test_browse_returns_the_passage_with_the_answer(toolbox, small_world) -> None:
    task = next(t for t in load_tasks(small_world, "test") if t.type == "hop1" and t.chain[0].relation == "born_in")
    context = ToolContext(task.question)
    outcome = await toolbox.call("browse_webpage", {"url_list": [task.evidence_urls[0]]}, context)
    [page] = orjson.loads(outcome.text)
    assert page["url"] == task.evidence_urls[0]
    assert task.golds[0] in page["information"]
    assert context.notes and task.golds[0] in "".join(context.notes)
    again = orjson.loads((await toolbox.call("browse_webpage", {"url_list": [task.evidence_urls[0]]}, context)).text)
    assert again[0]["information"].startswith("No new information"), "notes already held are not returned again"


@pytest.mark.parametrize(("name", "arguments", "message"), [
    ("web_search", {"query": []}, "is empty"),
    ("web_search", {"query": "a string"}, "must be a list of strings"),
    ("web_search", {"q": ["x"]}, 'needs the argument "query"'),
    ("web_search", ["not", "an", "object"], "must be a JSON object"),
    ("browse_webpage", {"url_list": [1, 2]}, "must be a list of strings"),
    ("open_page", {"url": "x"}, "Unknown tool 'open_page'"),
])
async def test_bad_calls_become_error_observations(toolbox, name, arguments, message) -> None:
    outcome = await toolbox.call(name, arguments, ToolContext("q"))
    assert message in outcome.error
    assert orjson.loads(outcome.text) == {"error": outcome.error}
    if name == "open_page":
        assert all(tool in outcome.error for tool in TOOL_NAMES)


async def test_unknown_url_is_a_per_page_error(toolbox) -> None:
    outcome = await toolbox.call("browse_webpage", {"url_list": ["https://nowhere.example/x"]}, ToolContext("q"))
    [page] = orjson.loads(outcome.text)
    assert "not in the local page store" in page["error"]


async def test_only_searched_urls_switch(world_config, small_world) -> None:
    world_config.browse.only_searched_urls = True
    async with WebEnvironment.from_config(world_config) as env:
        tools = ToolBox(env, world_config)
        context = ToolContext("q")
        url = "https://wikiverse.org/wiki/" + load_tasks(small_world, "test")[0].evidence_urls[0].rsplit("/", 1)[1]
        refused = orjson.loads((await tools.call("browse_webpage", {"url_list": [url]}, context)).text)
        assert "only URLs returned by web_search" in refused[0]["error"]
        hit = orjson.loads((await tools.call("web_search", {"query": ["population"]}, context)).text)
        first = hit[0]["web_page_info_list"][0]["url"]
        allowed = orjson.loads((await tools.call("browse_webpage", {"url_list": [first]}, context)).text)
        assert "information" in allowed[0]


async def test_non_utf8_and_empty_pages_are_read_without_crashing(tmp_path, world_config) -> None:
    from deepresearcher.web.backends.local_build import build_index

    docs = [
        {"url": "https://x.example/latin", "title": "Latin-1", "html": b"<html><body><p>Caf\xe9 au lait is served here daily.</p></body></html>".decode("latin-1")},
        {"url": "https://x.example/empty", "title": "Empty", "html": "<html><body></body></html>"},
    ]
    build_index(iter(docs), tmp_path / "idx")
    world_config.search.index = tmp_path / "idx"
    async with WebEnvironment.from_config(world_config) as env:
        outcome = await ToolBox(env, world_config).call(
            "browse_webpage", {"url_list": ["https://x.example/latin", "https://x.example/empty"]}, ToolContext("café"))
    latin, empty = orjson.loads(outcome.text)
    assert "Café au lait" in latin["information"]
    assert empty["error"] == "the page has no readable text"


async def test_compact_observations_carry_the_same_content_without_json(world_config, small_world) -> None:
    task = next(t for t in load_tasks(small_world, "test") if t.type == "hop1")
    world_config.browse.observation_format = "compact"
    async with WebEnvironment.from_config(world_config) as env:
        tools, context = ToolBox(env, world_config), ToolContext(task.question)
        searched = await tools.call("web_search", {"query": [task.chain[0].query]}, context)
        read = await tools.call("browse_webpage", {"url_list": [task.evidence_urls[0], "https://nowhere.example/"]},
                                context)
    first = searched.raw[0]["web_page_info_list"][0]
    assert searched.text.startswith(f"search: {task.chain[0].query}\n1. {first['title']} | {first['url']} | ")
    assert "{" not in searched.text and "quick_summary" not in searched.text
    page, missing = read.text.split("\n\n")
    assert page.startswith(f"page: {task.evidence_urls[0]}\n") and task.golds[0] in page
    assert missing.startswith("page: https://nowhere.example/\nerror: ")
    assert len(read.text) < len(orjson.dumps(read.raw))


async def test_compact_observations_without_echo_name_a_lone_query_or_url_only_in_the_call(world_config, small_world) -> None:
    task = next(t for t in load_tasks(small_world, "test") if t.type == "hop1")
    world_config.browse.observation_format = "compact"
    world_config.browse.observation_echo = False
    async with WebEnvironment.from_config(world_config) as env:
        tools, context = ToolBox(env, world_config), ToolContext(task.question)
        searched = await tools.call("web_search", {"query": [task.chain[0].query]}, context)
        read_one = await tools.call("browse_webpage", {"url_list": [task.evidence_urls[0]]}, context)
        read_two = await tools.call("browse_webpage", {"url_list": [task.evidence_urls[0], "https://nowhere.example/"]},
                                    context)
    first = searched.raw[0]["web_page_info_list"][0]
    assert searched.text.startswith(f"1. {first['title']} | {first['url']} | ")
    assert not read_one.text.startswith("page:") and task.golds[0] in read_one.text
    page, missing = read_two.text.split("\n\n")  # two blocks: each still says which URL it is
    assert page.startswith(f"page: {task.evidence_urls[0]}\n")
    assert missing.startswith("page: https://nowhere.example/\nerror: ")
