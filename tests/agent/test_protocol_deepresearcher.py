"""``agent.protocol: deepresearcher`` beyond the recorded turns: the original's parsing rules, its handler's
tool semantics over the real local index and reader, and the settings the protocol implies."""

from __future__ import annotations

import ast

import pytest

from deepresearcher.agent.loop import run_rollouts
from deepresearcher.agent.protocols import deepresearcher as original
from deepresearcher.agent.protocols import get_protocol
from deepresearcher.agent.template import ChatTemplate
from deepresearcher.config import load_config
from deepresearcher.errors import ConfigError
from deepresearcher.generate.scripted import ScriptedGenerator
from deepresearcher.web.environment import WebEnvironment
from deepresearcher.world import load_tasks

CALL = '<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'


def call(name: str, arguments: str, think: str = " plan </think>\n") -> str:
    return think + CALL.format(name=name, arguments=arguments)


@pytest.mark.parametrize(("text", "outcome"), [
    (" done </think>\n<answer> Paris </answer>", ("answer", "Paris")),
    (" done\n<answer>Paris</answer>", ("error", "unclosed_answer")),  # no </think>: the original refuses it
    (call("web_search", '{"query": ["a"]}') + "<answer>", ("error", "unclosed_answer")),  # any <answer> wins
    (call("browse_webpage", '{"url_list": ["u"], "query": ["q"]}'),
     ("call", ("browse_webpage", {"url_list": ["u"], "query": ["q"]}))),  # other arguments pass, as recorded
    (call("web_search", '{"query": []}'), ("call", ("web_search", {"query": []}))),
    (call("web_search", '{"query": "a"}'), ("error", "bad_arguments")),
    (call("browse_webpage", '{"url_list": []}'), ("error", "bad_arguments")),
    (call("web_search", '{"query": ["a"]}', think=" plan\n"), ("error", "unclosed_tool_call")),
    (call("calculator", "{}"), ("error", "unknown_tool")),
    (" plan </think>\n<tool_call>\n{not json}\n</tool_call>", ("error", "bad_json")),
    (" I will just talk.", ("error", "no_action")),
])
def test_turns_are_parsed_as_the_original_did(text, outcome) -> None:
    parsed = original.parse_turn(text)
    kind, value = outcome
    if kind == "answer":
        assert parsed.answer == value
    elif kind == "call":
        assert (parsed.tool_name, parsed.arguments) == value
    else:
        assert parsed.error_kind == value and parsed.answer is None and parsed.tool_name is None


@pytest.fixture
async def world_env(world_config):
    env = WebEnvironment.from_config(world_config)
    yield env
    await env.aclose()


def _observed(outcome) -> list:
    """The observation text is Python's ``str()`` of key-sorted dicts; read it back as Python literals."""
    return ast.literal_eval(outcome.text)


async def test_search_then_browse_follow_the_original_handler(world_env, world_config, small_world) -> None:
    """Three queries at most; browsing reads the last search's hits in result order, returns each page part of a
    hit once per search, ignores URLs the last search did not return, and a new search starts fresh."""
    protocol = get_protocol("deepresearcher")
    toolbox, context = protocol.make_toolbox(world_env, world_config), protocol.new_context("q")
    task = next(t for t in load_tasks(small_world, "test") if t.type == "hop1" and t.chain[0].relation == "born_in")
    query = task.chain[0].query
    searched = await toolbox.call("web_search", {"query": [query, "population", "founder", "fourth"]}, context)
    results = _observed(searched)
    assert [r["search_query"] for r in results] == [query, "population", "founder"]
    assert list(results[0]) == ["search_query", "web_page_info_list"]
    assert list(results[0]["web_page_info_list"][0]) == ["quick_summary", "title", "url"]
    hits = [h["url"] for r in results for h in r["web_page_info_list"]]
    first, second = hits[0], next(u for u in hits if u != hits[0])

    read = _observed(await toolbox.call("browse_webpage", {"url_list": [second, first, "https://elsewhere.org/"]},
                                        context))
    assert [p["url"] for p in read] == [u for u in hits if u in (first, second)], "result order, other URLs dropped"
    assert list(read[0]) == ["information", "url"]
    pages = read[0]["information"]
    assert pages and all(list(p) == ["page_number", "page_summary"] and p["page_number"] >= 0 for p in pages)
    assert [p["page_number"] for p in pages] == sorted(p["page_number"] for p in pages)

    again = _observed(await toolbox.call("browse_webpage", {"url_list": [first]}, context))
    assert again == [{"information": [], "url": first}] * hits.count(first), "nothing new from the same hit"
    await toolbox.call("web_search", {"query": [query]}, context)
    fresh = _observed(await toolbox.call("browse_webpage", {"url_list": [first]}, context))
    assert fresh[0]["information"] == pages


@pytest.mark.parametrize(("calls", "why"), [
    ([("browse_webpage", {"url_list": ["https://a.org/"]})], "browse before any search"),
    ([("web_search", {"query": [["nested"]]})], "a query that is not a string"),
])
async def test_failures_answer_an_empty_list(world_env, world_config, calls, why) -> None:
    protocol = get_protocol("deepresearcher")
    toolbox, context = protocol.make_toolbox(world_env, world_config), protocol.new_context("q")
    for name, arguments in calls:
        outcome = await toolbox.call(name, arguments, context)
    assert outcome.text == "[]" and outcome.error, why


@pytest.mark.parametrize("name", ["deepresearcher", "deepresearcher-rag"])
def test_the_protocol_implies_the_originals_settings(name: str) -> None:
    """32k context, ending on a malformed turn and eval at temperature 1.0 unless set; compact observations refused."""
    config = load_config(overrides=[f"agent.protocol={name}"])
    assert (config.agent.context_budget, config.agent.end_on_format_error, config.eval.temperature) == (32768, True, 1.0)
    config = load_config(overrides=[f"agent.protocol={name}", "agent.context_budget=8192", "eval.temperature=0"])
    assert (config.agent.context_budget, config.eval.temperature) == (8192, 0.0)
    native = load_config()
    assert (native.agent.context_budget, native.agent.end_on_format_error, native.eval.temperature) == (16384, False, 0.0)
    with pytest.raises(ConfigError, match="observation_format=compact"):
        load_config(overrides=[f"agent.protocol={name}", "browse.observation_format=compact"])
    with pytest.raises(ConfigError, match="agent.protocol"):
        load_config(overrides=["agent.protocol=paper"])


async def test_a_malformed_turn_ends_the_episode(qwen_tokenizer, world_env, world_config) -> None:
    """The first turn without a closed tag ends the episode there: no observation, no second turn."""
    config = load_config(overrides=["agent.protocol=deepresearcher"])
    protocol = get_protocol("deepresearcher")
    generator = ScriptedGenerator(qwen_tokenizer, [" I should search.\n<tool_call>\n{}\n"])
    (trajectory,) = await run_rollouts(["Q?"], generator, protocol.make_toolbox(world_env, world_config),
                                       qwen_tokenizer, config.agent, template=ChatTemplate(qwen_tokenizer, protocol))
    generator.assert_consumed()
    assert trajectory.termination == "format_error" and len(trajectory.turns) == 1
    assert [s.source for s in trajectory.segments] == ["prompt", "policy"]


async def test_rag_searches_the_local_index_as_the_handler_answered(world_env, world_config, small_world) -> None:
    """``deepresearcher-rag`` over a local index (``search.backend: local``): the one tool answers with the
    handler's search shape, hits from the index."""
    protocol = get_protocol("deepresearcher-rag")
    assert [t["function"]["name"] for t in protocol.tools] == ["web_search"]
    toolbox, context = protocol.make_toolbox(world_env, world_config), protocol.new_context("q")
    task = next(t for t in load_tasks(small_world, "test") if t.type == "hop1")
    results = _observed(await toolbox.call("web_search", {"query": [task.chain[0].query]}, context))
    assert list(results[0]) == ["search_query", "web_page_info_list"] and results[0]["web_page_info_list"]
    assert all(list(hit) == ["quick_summary", "title", "url"] for hit in results[0]["web_page_info_list"])


def test_a_chatml_template_without_tools_gets_the_qwen_rendering_of_the_call(smollm2_tokenizer) -> None:
    """A plain ChatML template (SmolLM2's, the tiny models') renders no tool calls: the call goes back into the context
    written as Qwen2.5's template writes it, the observation in ``<tool_response>``, and the mask still trains each
    assistant turn from ``<think>`` to ``<|im_end|>``."""
    import asyncio

    from deepresearcher.agent.tools import ToolOutcome

    class Toolbox:
        async def call(self, name, arguments, context):  # noqa: ANN001, ANN202
            return ToolOutcome(text="[]", raw=[])

    protocol = get_protocol("deepresearcher")
    config = load_config(overrides=["agent.protocol=deepresearcher"])
    generator = ScriptedGenerator(smollm2_tokenizer, [
        ' look </think>\n\n<tool_call>{"arguments":{"query":["b","a"]},"name":"web_search"}</tool_call>',
        " ok </think>\n<answer>x</answer>"])
    template = ChatTemplate(smollm2_tokenizer, protocol)
    (trajectory,) = asyncio.run(run_rollouts(["Q?"], generator, Toolbox(), smollm2_tokenizer, config.agent,
                                             template=template))
    assert trajectory.termination == "answer"
    assert trajectory.response_text.startswith(
        '<think> look </think>\n<tool_call>\n{"name": "web_search", "arguments": {"query": ["b", "a"]}}\n</tool_call>'
        "<|im_end|>\n<|im_start|>user\n<tool_response>\n[]\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>")
    trained = [smollm2_tokenizer.decode(s.token_ids) for s in trajectory.segments if s.source == "policy"]
    assert len(trained) == 2 and all(t.startswith("<think>") and t.endswith("<|im_end|>") for t in trained)
