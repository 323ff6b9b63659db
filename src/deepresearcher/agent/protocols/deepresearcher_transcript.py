"""The original DeepResearcher's transcript: a message list re-rendered whole before every turn.

What the original trainer did (``scrl/llm_agent/generation.py``, ``run_llm_loop``; Apache-2.0), and so what
this transcript does:

- before each turn it renders the whole conversation through the chat template with the tools, adds
  ``<think>`` and tokenizes that string whole; the policy samples to its end-of-turn token;
- a tool-call turn goes back into the conversation as its thinking and its call only
  (``deepresearcher.assistant_message``), then a ``tool`` message with the observation; what the policy
  sampled is dropped, so the next context holds the template's rendering of the call, not the sampled text
  (a template that renders no tools, plain ChatML, gets the call written as Qwen2.5's template writes it);
- when the episode ends on a sampled turn (an answer or a malformed turn) the episode's text is the decoded
  last context plus the decoded turn; when it ends after an observation (``max_turns``: the original ran the
  last turn's call) it is the whole conversation rendered with the generation prompt; ``<|endoftext|>`` is
  deleted from the decoded pieces;
- the trained sequence is the tokenized first prompt (system and user turn and the generation prompt, no
  ``<think>``) followed by the rest of that text tokenized whole, and the loss covers each assistant turn
  from its opening to its ``<|im_end|>`` (``deepresearcher.trained_mask``).

So the trained tokens are not all sampled ones and carry no sampling logprobs (``Segment.logprobs`` is None):
the trainer recomputes old log-probabilities from the policy (docs/agent.md, "What re-rendering costs").
"""

from __future__ import annotations

from typing import Any

from deepresearcher.agent.parsing import ParsedTurn
from deepresearcher.agent.prompts import THINK_OPEN
import deepresearcher.agent.protocols.deepresearcher as original
from deepresearcher.agent.trajectory import Segment, Trajectory
from deepresearcher.agent.transcript import ChatTemplate
from deepresearcher.generate.base import GenerationResult


_TURN_OPEN = "<|im_start|>"


class RenderedTranscript:
    """One episode's conversation as the original kept it; see the module docstring."""

    def __init__(self, template: ChatTemplate, trajectory: Trajectory) -> None:
        self.template = template
        self.trajectory = trajectory
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": template.system},
            {"role": "user", "content": template.protocol.user_prompt(trajectory.question)},
        ]
        self.first_prompt = template.render(self.messages, add_generation_prompt=True)
        turn_open = template.tokenizer.convert_tokens_to_ids(_TURN_OPEN)
        self._turn_open: int | None = turn_open if turn_open != template.tokenizer.unk_token_id else None
        self._head: tuple[str, list[int]] = ("", [])
        self._head_checked = False
        self._ids = self._tokenize_context(self.first_prompt + THINK_OPEN)
        self._turn: tuple[str, ParsedTurn] | None = None
        self._ending: tuple[list[int], list[int]] | None = None
        """If the episode ends now, its text is these decoded: the last context and the last sampled turn."""
        self._staged: tuple[list[dict[str, Any]], list[int]] | None = None

    @property
    def context_ids(self) -> list[int]:
        return self._ids

    def _tokenize(self, text: str) -> list[int]:
        """A whole string to ids, as ``tokenizer(text)["input_ids"]``."""
        return self.template.encode(text)

    def _tokenize_context(self, text: str) -> list[int]:
        """A context's ids, equal to tokenizing it whole, but only its new part is tokenized.

        Each context's text starts with the last one's (the conversation only grows), and a tokenizer splits its
        input at special tokens before anything else, so the ids up to the last context's final ``<|im_start|>``
        are reused and the rest is tokenized: each turn costs its own length, not the conversation's (a 33k-token
        context takes ~0.25 s to tokenize whole on a busy CPU core). Checked against the whole tokenization once
        per episode; a tokenizer for which the two differ is tokenized whole every turn.
        """
        head_text, head_ids = self._head
        if head_text and text.startswith(head_text):
            ids = head_ids + self._tokenize(text[len(head_text) :])
            if not self._head_checked:
                self._head_checked = True
                whole = self._tokenize(text)
                if whole != ids:
                    self._turn_open, ids = None, whole
        else:
            ids = self._tokenize(text)
        if self._turn_open is not None and self._turn_open in ids and _TURN_OPEN in text:
            at = len(ids) - 1 - ids[::-1].index(self._turn_open)
            self._head = (text[: text.rindex(_TURN_OPEN)], ids[:at])
        return ids

    def _decode(self, ids: list[int]) -> str:
        text = self.template.tokenizer.decode(ids, skip_special_tokens=False)
        return text.replace(original.END_OF_TEXT, "")

    def add_turn(self, result: GenerationResult, parsed: ParsedTurn) -> None:
        text = result.text if result.text is not None else self.template.tokenizer.decode(result.token_ids)
        self._turn = (text, parsed)
        self._ending = (self._ids, list(result.token_ids))

    def stage_observation(self, parsed: ParsedTurn, observation: str) -> int:
        assert self._turn is not None, "an observation follows a turn"
        text, _ = self._turn
        tool = self.template.tool_message(observation)
        if parsed.tool_name is not None:
            assistant = original.assistant_message(text, parsed, template_renders_tools=self.template.supports_tools)
            if tool["role"] == "tool":
                tool["name"] = parsed.tool_name
        else:  # a malformed turn the episode goes on after (agent.end_on_format_error off): kept as written
            assistant = {"role": "assistant", "content": THINK_OPEN + text.replace(original.ASSISTANT_CLOSE, "")}
        messages = [*self.messages, assistant, tool]
        ids = self._tokenize_context(self.template.render(messages, add_generation_prompt=True) + THINK_OPEN)
        self._staged = (messages, ids)
        return len(ids)

    def commit(self) -> None:
        assert self._staged is not None, "commit follows stage_observation"
        (self.messages, self._ids), self._staged = self._staged, None
        self._ending = None

    def finish(self) -> None:
        if self._ending is not None:
            text = self._decode(self._ending[0]) + self._decode(self._ending[1])
        else:  # after an observation (or before any turn): the conversation, its next turn opened
            text = self.template.render(self.messages, add_generation_prompt=True)
        response = text[len(self.first_prompt) :]
        prompt_ids = self._tokenize(self.first_prompt)
        response_ids = self._tokenize(response) if response else []
        tokenizer = self.template.tokenizer
        mask = original.trained_mask(response_ids, self._tokenize(original.ASSISTANT_OPEN),
                                     self._tokenize(original.ASSISTANT_CLOSE), tokenizer.pad_token_id)
        self.trajectory.segments = [Segment(source="prompt", token_ids=prompt_ids), *_runs(response_ids, mask)]
        # The original's reward manager decoded the trained ids, not the text they came from: the two differ
        # where sampled bytes did not form UTF-8 (a replacement character re-tokenizes to other ids).
        self.trajectory.response_text = tokenizer.decode(response_ids)


def _runs(ids: list[int], mask: list[int]) -> list[Segment]:
    """``ids`` cut where ``mask`` changes: trained runs are policy segments (no logprobs), the rest env ones."""
    segments: list[Segment] = []
    for token, trained in zip(ids, mask, strict=True):
        source = "policy" if trained else "env"
        if not segments or segments[-1].source != source:
            segments.append(Segment(source=source, token_ids=[]))
        segments[-1].token_ids.append(token)
    return segments
