"""Turn parsing: answers end, the first valid tool call runs, every malformed kind is named."""

from __future__ import annotations

from deepresearcher.agent.parsing import parse_turn
from deepresearcher.agent.tools import TOOL_SCHEMAS


def test_answer_wins_over_a_tool_call():
    parsed = parse_turn('<tool_call>{"name": "web_search", "arguments": {"query": ["a"]}}</tool_call><answer> 42 </answer>',
                        TOOL_SCHEMAS)
    assert parsed.answer == "42" and parsed.tool_name is None


def test_first_tool_call_is_taken_and_string_encoded_arguments_accepted():
    text = ('<tool_call>{"name": "browse_webpage", "arguments": "{\\"url_list\\": [\\"https://a.org\\"]}"}</tool_call>'
            '<tool_call>{"name": "web_search", "arguments": {"query": ["b"]}}</tool_call>')
    parsed = parse_turn(text, TOOL_SCHEMAS)
    assert (parsed.tool_name, parsed.arguments) == ("browse_webpage", {"url_list": ["https://a.org"]})


def test_malformed_kinds_and_messages():
    cases = {
        "<tool_call>[1, 2]</tool_call>": ("bad_json", "JSON object"),
        '<tool_call>{"name": "web_search", "arguments": {"query": ["a"], "k": 3}}</tool_call>': ("bad_arguments", "'k'"),
        '<tool_call>{"name": "web_search", "arguments": {}}</tool_call>': ("bad_arguments", "missing argument 'query'"),
        '<tool_call>{"name": "web_search", "arguments": {"query": [1]}}</tool_call>': ("bad_arguments", "array of string"),
        '<tool_call>{"name": "web_search", "arguments": [1]}</tool_call>': ("bad_arguments", "JSON object"),
    }
    for text, (kind, words) in cases.items():
        parsed = parse_turn(text, TOOL_SCHEMAS)
        assert parsed.error_kind == kind and words in parsed.error, (text, parsed)
