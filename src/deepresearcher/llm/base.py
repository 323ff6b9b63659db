"""The contract every chat client for a non-policy model (reader, judge) fulfils.

A client takes OpenAI-style messages and returns a :class:`ChatResult`; where the model runs (an
OpenAI-compatible server, transformers on this machine, the embedded SmolLM2) is the client's business.
Every client counts what it spends in a :class:`Usage`, so a run can report tokens and cost per model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

Message = dict[str, str]
"""One chat message: ``{"role": "system"|"user"|"assistant", "content": "..."}``."""


@dataclass(frozen=True)
class ChatResult:
    """One reply and what it cost."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""
    finish_reason: str = ""
    latency_s: float = 0.0


@dataclass
class Usage:
    """Running totals of one client; ``cost`` uses the configured prices per 1k tokens."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    failures: int = 0
    cost: float = 0.0
    price_prompt_per_1k: float = field(default=0.0, repr=False)
    price_completion_per_1k: float = field(default=0.0, repr=False)

    def add(self, result: ChatResult) -> None:
        """Count one successful reply."""
        self.requests += 1
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        self.cost += (
            result.prompt_tokens * self.price_prompt_per_1k + result.completion_tokens * self.price_completion_per_1k
        ) / 1000.0

    def as_dict(self) -> dict[str, Any]:
        """The totals as plain JSON-ready numbers (for metrics and bench output)."""
        return {
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "retries": self.retries,
            "failures": self.failures,
            "cost": round(self.cost, 6),
        }


@runtime_checkable
class ChatClient(Protocol):
    """An async chat model. ``sampling`` accepts ``max_tokens``, ``temperature``, ``top_p``, ``stop``."""

    model: str
    usage: Usage

    async def chat(self, messages: list[Message], **sampling: Any) -> ChatResult:
        """Return the model's reply to ``messages``; raises ``BackendError`` subclasses when it cannot."""
        ...

    async def aclose(self) -> None:
        """Release connections, worker tasks and threads; the client is unusable afterwards."""
        ...
