"""A generator that replays fixed replies: the test double for the agent loop and the rollout benchmark.

Each reply is tokenized once and returned as if sampled (logprob 0.0 each). Replies are consumed in
order, per script key (by default one shared script; ``key_of(prompt_ids)`` picks the script, so
concurrent rollouts each follow their own; ``key_by_text`` builds one from text in the prompt). ``assert_consumed`` fails loudly when a test
did not drive the loop through every reply it planned.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from deepresearcher.generate.base import GenerationResult, SamplingParams


class ScriptExhaustedError(AssertionError):
    """The loop asked for more turns than the script has."""


def key_by_text(tokenizer: Any, texts: dict[str, str]) -> Callable[[list[int]], str]:
    """A ``key_of`` that picks the script whose text (e.g. the question) appears in the decoded prompt."""
    return lambda ids: next(k for k, t in texts.items() if t in tokenizer.decode(ids))


class ScriptedGenerator:
    """Returns the next scripted reply for each request, truncated at ``max_tokens`` like a real model."""

    exact_tokens = True

    def __init__(
        self,
        tokenizer: Any,
        replies: Sequence[str] | dict[str, Sequence[str]],
        *,
        key_of: Callable[[list[int]], str] | None = None,
        latency: float = 0.0,
        eos: bool = True,
    ) -> None:
        """``replies``: one list, or scripts by key where ``key_of(prompt_ids)`` names the script to use.

        ``eos``: a reply that does not end on a stop string ends with the tokenizer's EOS token, as a chat model does.
        """
        self._tokenizer = tokenizer
        self._scripts = {"": deque(replies)} if not isinstance(replies, dict) else {k: deque(v) for k, v in replies.items()}
        self._encoded: dict[str, list[int]] = {}
        self._key_of = key_of
        self._latency = latency
        self._eos = eos
        self.calls = 0

    def _ids(self, text: str) -> list[int]:
        if text not in self._encoded:
            self._encoded[text] = list(self._tokenizer(text, add_special_tokens=False)["input_ids"])
        return self._encoded[text]

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> GenerationResult:
        self.calls += 1
        key = ""
        if self._key_of is not None:
            key = self._key_of(prompt_ids)
        script = self._scripts.get(key)
        if not script:
            raise ScriptExhaustedError(f"No scripted reply left for script {key!r} (call {self.calls}).")
        reply = script.popleft()
        if self._latency:
            await asyncio.sleep(self._latency)
        ids = list(self._ids(reply))
        stop_reason = next((s for s in params.stop if reply.endswith(s)), None)
        if stop_reason is None and self._eos and self._tokenizer.eos_token_id is not None:
            ids.append(self._tokenizer.eos_token_id)
            stop_reason = "eos"
        finish = "stop" if stop_reason is not None else "length"
        if len(ids) > params.max_tokens:
            ids, finish, stop_reason = ids[: params.max_tokens], "length", None
        return GenerationResult(
            token_ids=ids, logprobs=[0.0] * len(ids), finish_reason=finish, stop_reason=stop_reason
        )

    def assert_consumed(self) -> None:
        """Fail when replies are left: the test's scenario did not happen as planned."""
        left = {k: list(v) for k, v in self._scripts.items() if v}
        if left:
            raise AssertionError(f"Scripted replies were not all used: {left}")

    async def aclose(self) -> None:
        return None
