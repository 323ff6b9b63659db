"""The worked example a guided model reads in its system turn: one whole episode, search → read → answer.

A small model that was never trained on the protocol copies what it sees: the system turn's shapes alone
make SmolLM2-135M write their placeholders (``YOUR THINKING``, ``YOUR ANSWER``). One real episode shows it
what goes where: the question itself as the query, the page about the question's subject opened, the answer
copied from the page's notes. The example is invented (an ``example.org`` page about an invented company)
and its tool responses are rendered by the toolbox itself, in the configured observation format, so they
look exactly like the ones the model will read.
"""

from __future__ import annotations

import json

from deepresearcher.agent.tools import render_observation
from deepresearcher.config import Config

QUESTION = "Who founded Harrow Lantern Company?"
_URL = "https://example.org/wiki/Harrow_Lantern_Company"
_SEARCH = [{"search_query": QUESTION, "web_page_info_list": [
    {"title": "Harrow Lantern Company", "url": _URL,
     "quick_summary": "Harrow Lantern Company Harrow Lantern Company is a maker of lamps and lanterns."},
    {"title": "List of lamp makers", "url": "https://example.org/wiki/List_of_lamp_makers",
     "quick_summary": "List of lamp makers Harrow Lantern Company, Tesby Lights, Corran Glass"},
]}]
_READ = [{"url": _URL, "information": "| Founded by | Odile Marrant |\n| Founded | 1911 |\n"
          "Harrow Lantern Company was founded by Odile Marrant in 1911."}]
ANSWER = "Odile Marrant"


def _call(name: str, arguments: dict[str, list[str]]) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def worked_example(config: Config) -> str:
    """The example section appended to a guided model's system turn."""
    turns = [
        f"Question: {QUESTION}",
        "<think>\nI need to find who founded Harrow Lantern Company.\n</think>\n"
        + _call("web_search", {"query": [QUESTION]}),
        f"<tool_response>\n{render_observation(_SEARCH, config)}\n</tool_response>",
        f'<think>\nTo answer "{QUESTION}", I will read the page about Harrow Lantern Company\n</think>\n'
        + _call("browse_webpage", {"url_list": [_URL]}),
        f"<tool_response>\n{render_observation(_READ, config)}\n</tool_response>",
        f"<think>\nHarrow Lantern Company was founded by {ANSWER}.\n</think>\n<answer>\n{ANSWER}\n</answer>",
    ]
    return "\n\n## Example\n\nA question, then each turn of the assistant and each tool response:\n\n" + "\n\n".join(turns)
