"""Turn text into the exact token ids the policy sees, through the policy tokenizer's own chat template.

Only three pieces are ever tokenized, each once:

- the prompt: system + user turn + the generation prompt + ``<think>``;
- after each sampled turn, the *observation delta*: whatever closes the assistant turn (unless the model
  already sampled it, e.g. ``<|im_end|>``), the tool turn holding ``<tool_response>``, the next
  generation prompt and ``<think>``;
- nothing else: sampled ids are appended as they came from the generator.

The delta is found by rendering a fixed two-turn conversation with and without the tool turn and taking
the suffix, so it is exactly what the template would have produced, yet past turns are never re-rendered.
Templates that render ``tools`` (Qwen2.5 and most tool-capable models) get the schemas and a ``tool``
role message; the others (SmolLM2's plain ChatML) get the schemas in the system prompt and the
observation as a user turn wrapped in ``<tool_response>``.

That is the native protocol's token-in/token-out layout (``agent.transcript.TokenTranscript``); a protocol
that re-renders whole conversations (the original DeepResearcher's) uses ``render`` and ``encode`` directly.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from deepresearcher.agent.prompts import THINK_OPEN, tools_section
from deepresearcher.agent.protocols import NATIVE, AgentProtocol
from deepresearcher.errors import ChatTemplateError

_PLACEHOLDER = "@@DR_ASSISTANT_CONTENT@@"


class ChatTemplate:
    """The policy's chat template, bound to a protocol's tools and prompts."""

    def __init__(
        self,
        tokenizer: Any,
        protocol: AgentProtocol = NATIVE,
        *,
        today: dt.date | None = None,
        system: str | None = None,
    ) -> None:
        """``system`` replaces the protocol's system turn (dated ``today``, plus the tool schemas when the
        template does not render them itself)."""
        if not isinstance(protocol, AgentProtocol):
            raise TypeError(
                f"ChatTemplate takes an AgentProtocol (deepresearcher.agent.protocols.get_protocol), not "
                f"{type(protocol).__name__}; tool schemas are the protocol's `tools`."
            )
        template = getattr(tokenizer, "chat_template", None)
        if not template:
            name = getattr(tokenizer, "name_or_path", type(tokenizer).__name__)
            raise ChatTemplateError(
                f"Tokenizer {name!r} has no chat template, so the agent cannot format turns. Use an instruct/chat "
                "model, or set `chat_template` in its tokenizer_config.json (or pick another with agent.tokenizer)."
            )
        self.tokenizer = tokenizer
        self.protocol = protocol
        self._backend = getattr(tokenizer, "backend_tokenizer", None)
        probe = " Probe:\n<tool_call>{\"a\": [1]}</tool_call> text"
        if self._backend is not None and self._backend.encode(probe, add_special_tokens=False).ids != list(
            tokenizer(probe, add_special_tokens=False)["input_ids"]
        ):
            self._backend = None  # the Python wrapper does something the Rust tokenizer does not; use the wrapper
        self.supports_tools = "tools" in (template if isinstance(template, str) else str(template))
        default = protocol.system_prompt(today)
        self.system = system if system is not None else default if self.supports_tools else default + tools_section(self.tools)

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The protocol's tool schemas, as rendered into the prompt."""
        return self.protocol.tools

    @property
    def system(self) -> str:
        """The system turn. Setting it re-derives every cached piece (tool-turn delta, shared prompt ids)."""
        return self._system

    @system.setter
    def system(self, value: str) -> None:
        self._system = value
        self._close_text, self._observation_head, self._observation_tail = self._find_tool_turn()
        self._prompt_split: tuple[str, str] | None = None
        self._prompt_split = self._split_prompt()
        self._prompt_head, self._prompt_head_ids = self._find_prompt_head()

    def render(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool) -> str:
        """``messages`` through the policy's chat template, with the protocol's tool schemas, as text."""
        try:
            text = self.tokenizer.apply_chat_template(
                messages,
                tools=self.tools if self.supports_tools else None,
                tokenize=False,
                add_generation_prompt=add_generation_prompt,
            )
        except Exception as exc:  # jinja errors surface as many types
            raise ChatTemplateError(f"The policy's chat template failed to render our conversation: {exc}") from exc
        if not isinstance(text, str):
            raise ChatTemplateError("apply_chat_template(tokenize=False) did not return text; upgrade transformers.")
        return text

    def tool_message(self, content: str) -> dict[str, Any]:
        """A tool result as this template takes it: a ``tool`` message, else a user turn in ``<tool_response>``."""
        if self.supports_tools:
            return {"role": "tool", "content": content}
        return {"role": "user", "content": f"<tool_response>\n{content}\n</tool_response>"}

    def _find_tool_turn(self) -> tuple[str, str, str]:
        """Split the template's assistant close and tool turn around an observation, by rendering twice."""
        base = [
            {"role": "system", "content": self.system},
            {"role": "user", "content": "Q"},
            {"role": "assistant", "content": _PLACEHOLDER},
        ]
        marker = "@@DR_OBSERVATION@@"
        without = self.render(base, add_generation_prompt=False)
        with_tool = self.render([*base, self.tool_message(marker)], add_generation_prompt=True)
        if _PLACEHOLDER not in without or not with_tool.startswith(without) or with_tool.count(marker) != 1:
            raise ChatTemplateError(
                "The policy's chat template changes earlier turns when a tool turn is added, so observations cannot "
                "be appended token by token; use a template that renders turns independently (e.g. ChatML)."
            )
        close = without[without.index(_PLACEHOLDER) + len(_PLACEHOLDER) :]
        head, tail = with_tool[len(without) :].split(marker)
        return close, head, tail + THINK_OPEN

    def _split_prompt(self) -> tuple[str, str] | None:
        """The prompt around the question, rendered once, if the template inserts the question verbatim."""
        marker = "@@DR_QUESTION@@"
        text = self._render_prompt(marker)
        if text.count(marker) != 1:
            return None
        head, tail = text.split(marker)
        probe = "Who founded Example Corp in 1999? (a probe)"
        return (head, tail) if self._render_prompt(probe) == head + probe + tail else None

    def _find_prompt_head(self) -> tuple[str, list[int] | None]:
        """The part of every prompt before the question, up to its last special token, tokenized once.

        Tokenizers never merge across an added special token (``<|im_start|>``), so the head's ids plus the
        rest's ids are the ids of the whole; this is checked once here, else every prompt is encoded whole.
        """
        marker = "@@DR_QUESTION@@"
        text = self.prompt_text(marker)
        before = text[: text.index(marker)]
        specials = [t for t in getattr(self.tokenizer, "all_special_tokens", []) if t and t in before]
        cut = max((before.rindex(t) for t in specials), default=0)
        head = before[:cut]
        if not head:
            return "", None
        ids = self.encode(head)
        if ids + self.encode(text[cut:]) != self.encode(text):
            return "", None
        return head, ids

    def prompt_ids(self, question: str) -> list[int]:
        """Ids of ``prompt_text(question)``; the shared system part is tokenized once per template."""
        text = self.prompt_text(question)
        if self._prompt_head_ids is not None and text.startswith(self._prompt_head):
            return self._prompt_head_ids + self.encode(text[len(self._prompt_head) :])
        return self.encode(text)

    def encode(self, text: str) -> list[int]:
        """Tokenize text as-is: special tokens in it (``<|im_end|>``) become their ids, nothing is added."""
        if self._backend is not None:  # the Rust tokenizer directly: same ids, a fraction of the wrapper's cost
            return self._backend.encode(text, add_special_tokens=False).ids
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _render_prompt(self, question: str) -> str:
        user = self.protocol.user_prompt(question)
        messages = [{"role": "system", "content": self.system}, {"role": "user", "content": user}]
        return self.render(messages, add_generation_prompt=True) + THINK_OPEN

    def prompt_text(self, question: str) -> str:
        """System and user turn, then the assistant's opening and ``<think>``."""
        question = self.protocol.user_prompt(question)
        if self._prompt_split is not None:
            return self._prompt_split[0] + question + self._prompt_split[1]
        return self._render_prompt(question)

    def observation_text(self, observation: str, sampled_ids: list[int]) -> str:
        """Text appended after a sampled turn: the rest of the assistant close, the tool turn, the next opening."""
        close = self._close_text
        if sampled_ids:
            last = self.tokenizer.decode(sampled_ids[-1:], skip_special_tokens=False)
            if last and close.startswith(last) and sampled_ids[-1] in self.stop_token_ids:
                close = close[len(last) :]
        return close + self._observation_head + observation + self._observation_tail

    @property
    def stop_token_ids(self) -> set[int]:
        """Ids that end an assistant turn (the tokenizer's EOS)."""
        eos = self.tokenizer.eos_token_id
        return {eos} if isinstance(eos, int) else set(eos or [])
