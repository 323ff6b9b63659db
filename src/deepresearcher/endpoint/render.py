"""OpenAI messages to the policy's prompt ids, through its own chat template, and sampled text back to a message.

**Prompt.** The conversation is rendered by the tokenizer's chat template with the request's ``tools``. A template
that renders ``tools`` itself (Qwen2.5 and most tool-capable models) gets them and structured ``tool_calls``; for the
others (plain ChatML: SmolLM2, the quickstart's tiny model) the schemas are appended to the system turn in the
Qwen/Hermes ``<tools>`` format, tool results become user turns wrapped in ``<tool_response>`` and an assistant's
calls are written as ``<tool_call>{json}</tool_call>``, as the project's own agent lays them out
(``agent.template.ChatTemplate``).

**Sampled turns are spliced, never re-tokenized.** An assistant message the endpoint itself sampled (the episode
recognises it, ``endpoint.episodes``) is rendered as a placeholder; the text is cut there and the turn's prefill and
sampled ids go in its place, then whatever closes the turn (minus an end-of-turn token the model sampled itself).
So a re-sent history encodes to exactly the ids the policy read and wrote before. Splicing needs a template that
renders each turn independently of the turns after it and opens an assistant turn as its generation prompt does
(ChatML does); ``ChatRenderer.splices`` is False otherwise, and every prompt is then rendered from text (each
request then drifts, ``endpoint.episodes``).

**Layout.** ``ChatLayout`` is what the project's agent protocol adds to the bare template, so the policy the project
trains reads its turns laid out as in training: its system turn when the client sends none, the ``<think>`` every
turn starts with (prefilled, not sampled), the strings that end a turn, and the ``<answer>`` tag its final turn
wraps the answer in (returned as plain ``content``). ``ChatLayout()`` is the bare template.

**Reply.** A sampled turn becomes an OpenAI assistant message: its thinking (``<think>...</think>``) in
``reasoning_content``, each well-formed ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` in
``tool_calls`` (arguments as JSON text, a fresh ``call_...`` id each), the rest in ``content``. A block that is not
such a JSON object stays in ``content``, as text: the client sees what the model wrote.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deepresearcher.agent.prompts import THINK_OPEN, tools_section
from deepresearcher.endpoint.openai_types import ChatMessage
from deepresearcher.errors import ChatTemplateError

THINK_CLOSE = "</think>"
_PLACEHOLDER = "@@DR_SAMPLED_TURN@@"
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_ACTION = re.compile(r"<tool_call>|<answer>")


@dataclass(frozen=True)
class ChatLayout:
    """What a policy's turns carry around the chat template (the bare template: all empty)."""

    system: str | None = None
    """The system turn when the client sends none (None: the template's own default, if any)."""
    prefill: str = ""
    """Text every assistant turn starts with, written by the endpoint after the generation prompt, not sampled."""
    stop: tuple[str, ...] = ()
    """Strings that end a turn besides the end-of-turn token (kept in the sampled ids)."""
    answer_tag: bool = False
    """Whether a final turn wraps its answer in ``<answer>`` (unwrapped into ``content``, wrapped back when a
    client's own assistant message is rendered)."""

    @classmethod
    def for_protocol(cls, protocol: Any, system: str) -> ChatLayout:
        """The project's agent as it is trained: ``system`` (``agent.session.make_template(...).system``), the
        ``<think>`` prefill and the protocol's stop strings."""
        return cls(system=system, prefill=THINK_OPEN, stop=tuple(protocol.stop), answer_tag=True)


class ChatRenderer:
    """Renders conversations for one tokenizer and layout, and reads sampled turns back."""

    def __init__(self, tokenizer: Any, layout: ChatLayout | None = None) -> None:
        template = getattr(tokenizer, "chat_template", None)
        if not template:
            name = getattr(tokenizer, "name_or_path", type(tokenizer).__name__)
            raise ChatTemplateError(f"Tokenizer {name!r} has no chat template, so chat messages cannot be rendered "
                                    "for it; serve an instruct/chat model or set agent.tokenizer.")
        self.tokenizer = tokenizer
        self.layout = layout or ChatLayout()
        self.renders_tools = "tools" in (template if isinstance(template, str) else str(template))
        eos = tokenizer.eos_token_id
        self.end_of_turn_ids: set[int] = {eos} if isinstance(eos, int) else set(eos or [])
        self.splices = self._splices()

    # --- prompts ---------------------------------------------------------------------------------------

    def prompt_ids(self, messages: Sequence[ChatMessage], tools: list[dict[str, Any]] | None,
                   sampled: Mapping[int, Sequence[int]] | None = None) -> list[int]:
        """The ids the policy reads for ``messages``: rendered with ``tools``, the generation prompt and the prefill.

        ``sampled`` maps the index of an assistant message the endpoint sampled to the ids it sampled; those turns
        are spliced in as sampled (module docstring) when the template allows it, else rendered from text."""
        spliced = dict(sampled or {}) if self.splices else {}
        rendered = self._template_messages(messages, tools, spliced)
        text = self.render(rendered, tools, add_generation_prompt=True) + self.layout.prefill
        pieces = text.split(_PLACEHOLDER)
        turns = [spliced[i] for i in sorted(spliced)]
        if len(pieces) != len(turns) + 1:  # a message's own text holds the marker: render without splicing
            return self.encode(self.render(self._template_messages(messages, tools, {}), tools,
                                           add_generation_prompt=True) + self.layout.prefill)
        ids = self.encode(pieces[0] + self.layout.prefill) if turns else self.encode(pieces[0])
        for n, turn in enumerate(turns):
            after = self._after_turn(pieces[n + 1], turn)
            ids += list(turn) + self.encode(after + (self.layout.prefill if n + 1 < len(turns) else ""))
        return ids

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, *,
               add_generation_prompt: bool) -> str:
        """Template messages through the chat template, as text."""
        try:
            text = self.tokenizer.apply_chat_template(
                messages, tools=tools if self.renders_tools and tools else None, tokenize=False,
                add_generation_prompt=add_generation_prompt)
        except Exception as exc:  # jinja errors surface as many types
            raise ChatTemplateError(f"The policy's chat template failed to render the conversation: {exc}") from exc
        if not isinstance(text, str):
            raise ChatTemplateError("apply_chat_template(tokenize=False) did not return text; upgrade transformers.")
        return text

    def encode(self, text: str) -> list[int]:
        """Text as-is: special tokens in it (``<|im_end|>``) become their ids, nothing is added."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    def _after_turn(self, piece: str, turn: Sequence[int]) -> str:
        """The text after a spliced turn, less the end-of-turn token the model already sampled."""
        if turn and turn[-1] in self.end_of_turn_ids:
            last = self.tokenizer.decode([turn[-1]], skip_special_tokens=False)
            if last and piece.startswith(last):
                return piece[len(last):]
        return piece

    def _template_messages(self, messages: Sequence[ChatMessage], tools: list[dict[str, Any]] | None,
                           spliced: Mapping[int, Sequence[int]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if messages[0].role not in ("system", "developer"):
            system = self._system_text(self.layout.system, tools, default=True)
            if system is not None:
                out.append({"role": "system", "content": system})
        for index, message in enumerate(messages):
            if index in spliced:
                out.append({"role": "assistant", "content": _PLACEHOLDER})
            elif message.role in ("system", "developer"):
                out.append({"role": "system", "content": self._system_text(message.text(), tools, default=False)})
            elif message.role == "tool":
                out.append(self._tool_message(message.text()))
            elif message.role == "assistant":
                out.append(self._assistant_message(message))
            else:
                out.append({"role": message.role, "content": message.text()})
        return out

    def _system_text(self, text: str | None, tools: list[dict[str, Any]] | None, *, default: bool) -> str | None:
        """A system turn with the tool schemas appended where the template does not render them. The layout's
        default system turn is used as the policy was trained on it: it already describes its tools."""
        if self.renders_tools or not tools or (default and text is not None):
            return text
        section = tools_section(tools)
        return text + section if text else section.lstrip()

    def _tool_message(self, content: str) -> dict[str, Any]:
        if self.renders_tools:
            return {"role": "tool", "content": content}
        return {"role": "user", "content": f"<tool_response>\n{content}\n</tool_response>"}

    def _assistant_message(self, message: ChatMessage) -> dict[str, Any]:
        """An assistant message the endpoint did not sample (or a client changed), in the turn's text form."""
        content = message.text()
        if self.layout.answer_tag and content and not message.tool_calls:
            content = f"<answer>{content}</answer>"
        if message.reasoning_content:
            content = f"{THINK_OPEN}\n{message.reasoning_content.strip()}\n{THINK_CLOSE}\n{content}"
        calls = [{"name": c.function.name, "arguments": _json_or_text(c.function.arguments)}
                 for c in message.tool_calls or []]
        if not calls:
            return {"role": "assistant", "content": content}
        if self.renders_tools:
            return {"role": "assistant", "content": content,
                    "tool_calls": [{"type": "function", "function": call} for call in calls]}
        blocks = "".join(f"\n<tool_call>\n{json.dumps(call, ensure_ascii=False)}\n</tool_call>" for call in calls)
        return {"role": "assistant", "content": (content + blocks).lstrip("\n")}

    def _splices(self) -> bool:
        """Whether sampled turns can be spliced: the template opens an assistant turn exactly as its generation
        prompt does, and adding a turn never changes the text of the turns before it."""
        head = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]
        turn = {"role": "assistant", "content": _PLACEHOLDER}
        prompt = self.render(head, None, add_generation_prompt=True)
        with_turn = self.render([*head, turn], None, add_generation_prompt=False)
        after = self.render([*head, turn, self._tool_message("O"), {"role": "user", "content": "U"}], None,
                            add_generation_prompt=True)
        return with_turn.startswith(prompt + _PLACEHOLDER) and after.startswith(with_turn)

    # --- replies ---------------------------------------------------------------------------------------

    def decode(self, ids: Sequence[int], *, keep_special: bool = False) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=not keep_special)

    def reply(self, text: str) -> dict[str, Any]:
        """A sampled turn's text (after the prefill) as an OpenAI assistant message."""
        full = (self.layout.prefill + text).lstrip()
        reasoning, visible = None, full
        if full.startswith(THINK_OPEN):  # thinking runs to </think>, or (unclosed) to the first call or answer
            inner = full[len(THINK_OPEN):]
            cut = inner.find(THINK_CLOSE)
            if cut >= 0:
                reasoning, visible = inner[:cut], inner[cut + len(THINK_CLOSE):]
            else:
                action = _ACTION.search(inner)
                cut = action.start() if action else len(inner)
                reasoning, visible = inner[:cut], inner[cut:]
        calls: list[dict[str, Any]] = []

        def take(match: re.Match[str]) -> str:
            call = _tool_call(match.group(1))
            if call is None:
                return match.group(0)
            calls.append(call)
            return ""

        content = _TOOL_CALL.sub(take, visible).strip()
        if self.layout.answer_tag and not calls and (answer := _ANSWER.search(content)):
            content = answer.group(1).strip()
        message: dict[str, Any] = {"role": "assistant", "content": content or (None if calls else "")}
        if reasoning is not None and reasoning.strip():
            message["reasoning_content"] = reasoning.strip()
        if calls:
            message["tool_calls"] = calls
        return message


def _tool_call(body: str) -> dict[str, Any] | None:
    """One ``<tool_call>`` body as an OpenAI tool call, or None when it is not ``{"name": str, "arguments": ...}``."""
    try:
        payload = json.loads(body)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        return None
    arguments = payload.get("arguments", {})
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
            "function": {"name": payload["name"], "arguments": text}}


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
