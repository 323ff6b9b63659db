"""No text a policy writes may crash a rollout: both protocols' parsers over arbitrary text (hypothesis), the
deepresearcher parser against the original's own ``parse_response`` on the same text, and a batch in which one
rollout writes a call nested 1,500 deep while the others finish."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepresearcher.agent.loop import run_rollouts
from deepresearcher.agent.parsing import ParsedTurn
from deepresearcher.agent.protocols import get_protocol
from deepresearcher.agent.template import ChatTemplate
from deepresearcher.config import load_config
from deepresearcher.generate.scripted import ScriptedGenerator, key_by_text

DEGENERATE = " plan </think>\n<tool_call>\n" + "[" * 1500 + "]" * 1500 + "\n</tool_call>"
"""A turn of 1,500 opening and closing brackets inside a tool call: deeper than Python's recursion limit."""

PIECES = ["<think>", "</think>", "<answer>", "</answer>", "<tool_call>", "</tool_call>", "\n", " ", "{", "}", "[", "]",
          '"name"', '"arguments"', ":", ",", '"web_search"', '"browse_webpage"', '"query"', '"url_list"', '"q"', "[]",
          '["a"]', "null", "1", '"', "\\", "Paris", "<|im_end|>", "[" * 1200, "]" * 1200, "{" * 1200]
tag_soup = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=8)), max_size=40).map("".join)
any_text = st.one_of(st.text(max_size=300), tag_soup)


def _one_outcome(parsed: ParsedTurn) -> None:
    assert sum(x is not None for x in (parsed.answer, parsed.tool_name, parsed.error_kind)) == 1


@pytest.mark.parametrize("name", ["native", "deepresearcher"])
def test_the_degenerate_call_is_a_format_error(name: str) -> None:
    protocol = get_protocol(name)
    parsed = protocol.parse_turn(DEGENERATE, protocol.tools)
    assert parsed.error_kind == "bad_json" and "deep" in (parsed.error or "")


def test_a_call_nested_past_what_trajectories_can_hold_is_refused() -> None:
    """A call the original would have run, nested 300 deep in an argument it ignores: kept, the trajectory could
    not be written (JSON writers stop at 254 levels), so it is malformed; 60 levels still run."""
    from deepresearcher.agent.trajectory import ToolCallRecord, Trajectory, TurnRecord

    protocol = get_protocol("deepresearcher")
    for depth, runs in ((60, True), (300, False)):
        call = '{"name": "web_search", "arguments": {"query": ["a"], "x": %s}}' % ("[" * depth + "]" * depth)
        parsed = protocol.parse_turn(f" x </think>\n<tool_call>\n{call}\n</tool_call>", protocol.tools)
        assert (parsed.tool_name == "web_search") == runs and (parsed.error_kind == "bad_json") != runs
        if runs:
            record = ToolCallRecord(name="web_search", arguments=parsed.arguments)
            Trajectory(turns=[TurnRecord(text="x", tool_call=record)]).to_json_line()


@pytest.mark.parametrize("name", ["native", "deepresearcher"])
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=any_text)
def test_parsers_never_raise(name: str, text: str) -> None:
    protocol = get_protocol(name)
    _one_outcome(protocol.parse_turn(text, protocol.tools))


@pytest.fixture(scope="module")
def original_parse(reference_method) -> Any:
    """The original's ``LLMGenerationManager.parse_response`` on one decoded turn: ``(stop, think, call)``."""
    parse = reference_method("scrl/llm_agent/generation.py", "LLMGenerationManager", "parse_response",
                             json=json, print=lambda *a, **k: None)
    manager = type("Manager", (), {"tokenizer": type("T", (), {"batch_decode": lambda _, rows: rows})()})()
    return lambda text: parse(manager, [text], think=True)[0]


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=any_text)
def test_deepresearcher_parser_decides_as_the_original(original_parse, text: str) -> None:
    """Same text, same verdict: the original stops where we answer or fail, and runs the call we run."""
    stop, _, call = original_parse(text)
    ours = get_protocol("deepresearcher").parse_turn(text, [])
    assert stop == (ours.tool_name is None)
    if not stop:
        assert (call["name"], call["arguments"]) == (ours.tool_name, ours.arguments)


class _NoTools:
    async def call(self, name: str, arguments: dict[str, Any], context: Any) -> Any:
        raise AssertionError("no rollout of this test calls a tool")


@pytest.mark.parametrize("name", ["native", "deepresearcher"])
@pytest.mark.parametrize("parser", ["own", "raising"])
def test_one_degenerate_rollout_ends_alone(qwen_tokenizer, name: str, parser: str) -> None:
    """Three rollouts in one batch; one writes the degenerate call (or meets a parser that raises): it ends as a
    format failure and the other two answer."""
    protocol = get_protocol(name)
    if parser == "raising":
        def parse(text: str, tools: list[dict[str, Any]]) -> ParsedTurn:
            if "[[[" in text:
                raise RecursionError("maximum recursion depth exceeded")
            return get_protocol(name).parse_turn(text, tools)

        protocol = dataclasses.replace(protocol, parse_turn=parse)
    config = load_config(overrides=[f"agent.protocol={name}", "agent.end_on_format_error=true"])
    questions = {"a": "Who wrote Alpha?", "b": "Who wrote Beta?", "c": "Who wrote Gamma?"}
    scripts = {"a": [" ok </think>\n<answer>A</answer>"], "b": [DEGENERATE], "c": [" ok </think>\n<answer>C</answer>"]}
    generator = ScriptedGenerator(qwen_tokenizer, scripts, key_of=key_by_text(qwen_tokenizer, questions))
    template = ChatTemplate(qwen_tokenizer, protocol)
    trajectories = asyncio.run(run_rollouts(list(questions.values()), generator, _NoTools(), qwen_tokenizer,
                                            config.agent, template=template))
    assert [t.termination for t in trajectories] == ["answer", "format_error", "answer"]
    assert [t.answer for t in trajectories] == ["A", None, "C"]
    kind = trajectories[1].turns[0].format_error or ""
    assert kind.startswith("unparsable" if parser == "raising" else "bad_json")


@pytest.fixture(scope="module")
def original_mask(reference_method) -> Any:
    """The original trainer's ``process_response_mask`` (``dp_actor.py``), compiled alone."""
    return reference_method("verl/workers/actor/dp_actor.py", "DataParallelPPOActor", "process_response_mask")


OPEN, CLOSE, PAD = [7, 8, 9], [5], 0


@settings(max_examples=500, deadline=None)
@given(ids=st.lists(st.one_of(st.sampled_from([OPEN, CLOSE, [PAD], [1], [2, 3]]), st.lists(st.integers(0, 9),
                                                                                           max_size=4)),
                    max_size=30).map(lambda parts: [t for p in parts for t in p]))
def test_trained_mask_is_the_original_trainers(original_mask, ids: list[int]) -> None:
    """Our restatement of the original's loss mask agrees with its own function on any response: spans from each
    opening to its close inclusive, an unclosed span to the end less trailing padding, the token after a close
    skipped."""
    import torch

    from deepresearcher.agent.protocols.deepresearcher import trained_mask

    tokenizer = type("T", (), {"pad_token_id": PAD,
                               "encode": lambda _, text, add_special_tokens=False: OPEN if "start" in text else CLOSE})()
    responses = torch.tensor([ids or [1]])
    expected = original_mask(None, responses, torch.ones_like(responses), tokenizer)[0].tolist()
    assert trained_mask(ids or [1], OPEN, CLOSE, PAD) == expected
