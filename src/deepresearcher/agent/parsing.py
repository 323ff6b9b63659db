"""Read one sampled turn: an answer, a tool call, or a format error the model is told about.

Rules, in order:

1. ``<answer>…</answer>`` anywhere in the turn ends the episode with that answer.
2. Otherwise the first ``<tool_call>{json}</tool_call>`` is the action; its JSON must be an object
   ``{"name": <known tool>, "arguments": {...}}`` whose arguments match the tool's schema.
3. Anything else is a format error with a kind and a message that says what to fix:

   ==================  ==========================================================
   kind                meaning
   ==================  ==========================================================
   unclosed_answer     ``<answer>`` without ``</answer>``
   unclosed_tool_call  ``<tool_call>`` without ``</tool_call>``
   bad_json            the tool call body is not a JSON object
   missing_name        the JSON has no string ``name``
   unknown_tool        ``name`` is not one of the tools
   bad_arguments       missing/extra arguments or wrong types
   no_action           neither a tool call nor an answer
   unparsable          the parser itself failed on the turn (the rollout engine's guard)
   ==================  ==========================================================
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, Field

FormatErrorKind = Literal[
    "unclosed_answer", "unclosed_tool_call", "bad_json", "missing_name", "unknown_tool", "bad_arguments", "no_action",
    "unparsable",
]

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "array": (list,),
    "object": (dict,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


class ParsedTurn(BaseModel):
    """What a turn asked for: exactly one of ``answer``, ``tool_name`` or ``error_kind`` is set."""

    answer: str | None = None
    tool_name: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    error_kind: FormatErrorKind | None = None
    error: str | None = None


def _error(kind: FormatErrorKind, message: str) -> ParsedTurn:
    return ParsedTurn(error_kind=kind, error=message)


def _check_type(value: Any, schema: dict[str, Any]) -> bool:
    expected = schema.get("type")
    if expected is None:
        return True
    types = _JSON_TYPES.get(expected, (object,))
    if isinstance(value, bool) and expected in ("integer", "number"):
        return False
    if not isinstance(value, types):
        return False
    if expected == "array" and "items" in schema:
        return all(_check_type(item, schema["items"]) for item in value)
    return True


def check_arguments(arguments: dict[str, Any], parameters: dict[str, Any]) -> str | None:
    """Check arguments against a tool's JSON-schema ``parameters``; return what is wrong, or None."""
    properties: dict[str, Any] = parameters.get("properties", {})
    problems = [f"missing argument {name!r}" for name in parameters.get("required", []) if name not in arguments]
    problems += [f"unknown argument {name!r}" for name in arguments if properties and name not in properties]
    for name, value in arguments.items():
        schema = properties.get(name)
        if schema is not None and not _check_type(value, schema):
            want = schema.get("type", "?")
            if want == "array" and "items" in schema:
                want = f"array of {schema['items'].get('type', '?')}"
            problems.append(f"argument {name!r} must be {want}, got {json.dumps(value)[:80]}")
    return "; ".join(problems) or None


def parse_turn(text: str, tools: list[dict[str, Any]]) -> ParsedTurn:
    """Parse one assistant turn against the tool schemas (OpenAI function format)."""
    answer = _ANSWER.search(text)
    if answer:
        return ParsedTurn(answer=answer.group(1).strip())
    call = _TOOL_CALL.search(text)
    if call is None:
        if "<tool_call>" in text:
            return _error("unclosed_tool_call", "Your <tool_call> has no closing </tool_call> tag.")
        if "<answer>" in text:
            return _error("unclosed_answer", "Your <answer> has no closing </answer> tag.")
        return _error(
            "no_action",
            "Your turn has neither a <tool_call> nor an <answer>. End each turn with one of them.",
        )
    functions = {t["function"]["name"]: t["function"] for t in tools}
    names = ", ".join(functions)
    body = call.group(1).strip()
    try:
        payload = json.loads(body)
    except json.JSONDecodeError as exc:
        return _error("bad_json", f"The tool call is not valid JSON ({exc.msg} at char {exc.pos}). "
                      'Write {"name": ..., "arguments": {...}} inside <tool_call></tool_call>.')
    except RecursionError:  # thousands of nested brackets: json's decoder recurses once per level
        return _error("bad_json", "The tool call nests too deeply to be read. "
                      'Write {"name": ..., "arguments": {...}} inside <tool_call></tool_call>.')
    if not isinstance(payload, dict):
        return _error("bad_json", 'The tool call must be a JSON object {"name": ..., "arguments": {...}}.')
    name = payload.get("name")
    if not isinstance(name, str) or not name:
        return _error("missing_name", f'The tool call has no "name"; the tools are: {names}.')
    if name not in functions:
        return _error("unknown_tool", f"There is no tool named {name!r}; the tools are: {names}.")
    arguments = payload.get("arguments", {})
    if isinstance(arguments, str):  # some models double-encode the arguments
        try:
            arguments = json.loads(arguments)
        except (json.JSONDecodeError, RecursionError):
            pass
    if not isinstance(arguments, dict):
        return _error("bad_arguments", f'The "arguments" of {name} must be a JSON object.')
    problem = check_arguments(arguments, functions[name].get("parameters", {}))
    if problem:
        return _error("bad_arguments", f"Bad arguments for {name}: {problem}.")
    return ParsedTurn(tool_name=name, arguments=arguments)
