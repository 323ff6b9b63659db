"""The policy's instructions, in the spirit of the DeepResearcher paper's system prompt.

The system turn states today's date, the two tools, and the two allowed turn shapes (think, then
either a tool call or the answer); the user turn is the question itself. Models whose chat template
renders tools get the schemas through ``apply_chat_template(tools=...)``; for the others
``tools_section`` appends the same schemas in the Qwen/Hermes ``<tools>`` format.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

THINK_OPEN = "<think>"
"""What the chat template writes after each assistant opening: every turn starts inside its thinking."""

SYSTEM_PROMPT = """## Background information
* Today is {today}
* You are a deep research assistant.

The question I give you needs research on the web to answer well.

You have two tools:
* web_search: search the web; give it one or more queries and it returns titles, URLs and snippets.
* browse_webpage: open one or more URLs and get back notes from each page that matter for the question.

You don't have to answer right away: first think about a research plan, or about what to search or read next.

Each of your turns must have one of these two shapes:

<think>
YOUR THINKING
</think>
<tool_call>
{{"name": "TOOL NAME", "arguments": {{...}}}}
</tool_call>

or

<think>
YOUR THINKING
</think>
<answer>
YOUR ANSWER
</answer>

Follow these shapes strictly, with one tool call per turn.
Put only the final answer (a few words, a number or a short phrase) inside <answer></answer>, without explanations. \
If the question is a yes-or-no question, answer only yes or no."""

TOOLS_SECTION = """

# Tools

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{schemas}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</tool_call>"""


def system_prompt(today: dt.date | None = None) -> str:
    """The system turn, dated ``today`` (UTC date by default) as the paper does."""
    day = today or dt.datetime.now(dt.timezone.utc).date()
    return SYSTEM_PROMPT.format(today=day.isoformat())


def user_prompt(question: str) -> str:
    """The user turn: the question, verbatim."""
    return question.strip()


def tools_section(schemas: list[dict[str, Any]]) -> str:
    """The tool schemas as text, for chat templates that do not render ``tools`` themselves."""
    return TOOLS_SECTION.format(schemas="\n".join(json.dumps(s, ensure_ascii=False) for s in schemas))
