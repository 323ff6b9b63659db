"""What one generation request asks for and what it returns, shared by every engine and client.

Policy generators (``generate/``) and the local engine (``inference.engine``) speak these two shapes:
prompt token ids plus :class:`SamplingParams` in, :class:`GenerationResult` out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

FinishReason = Literal["stop", "length"]


class TokenConstraint(Protocol):
    """Which tokens a request may sample next: guided decoding of a model that does not know a protocol
    (``deepresearcher.agent.guide``). Only the local engine honours it (``LocalEngine.supports_constraints``)."""

    def allowed(self, sampled: list[int]) -> Sequence[int] | Any | None:
        """The ids allowed after ``sampled`` (this request's ids so far), as a sequence or a 1-D long tensor,
        never empty; None: any token."""
        ...


class SamplingParams(BaseModel):
    """How one turn is sampled."""

    max_tokens: int = Field(2000, ge=1, description="New tokens at most; the turn finishes with `length` after.")
    temperature: float = Field(1.0, ge=0.0, description="0 is greedy.")
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    stop: list[str] = Field(
        default_factory=list,
        description="Strings that end the turn; the tokens that complete one are kept in the output.",
    )
    seed: int | None = None
    session: int | None = Field(
        None,
        description="Requests of one session (an episode's turns) share the start of their token ids with the "
        "previous one's prompt and sampled ids (usually they extend them), so a generator may keep that session's "
        "KV cache from one call to the next; None: no reuse.",
    )
    constraint: Any = Field(
        None, exclude=True, repr=False,
        description="A `TokenConstraint` masking each step's logits to the tokens it allows (the sampled token's "
        "logprob is then under the masked distribution); not sent to servers. None: unconstrained.",
    )


class GenerationResult(BaseModel):
    """What one request sampled."""

    token_ids: list[int]
    logprobs: list[float] | None = Field(None, description="Logprob of each sampled token; None if unknown.")
    finish_reason: FinishReason
    stop_reason: str | None = Field(None, description="The stop string matched, or `eos`; None on `length`.")
    text: str | None = Field(None, description="Decoded text, when the generator has it.")
