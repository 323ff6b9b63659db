"""Trajectories, token-in/token-out: the exact ids a policy saw and sampled, and the loss mask.

A trajectory is a list of segments laid end to end::

    | prompt (system + user) | policy turn 1 | env: tool response 1 | policy turn 2 | ... | policy: answer |
      source="prompt"          source="policy"  source="env"          source="policy"       source="policy"
      mask 0                   mask 1           mask 0                mask 1                mask 1

Under the native protocol (token-in/token-out) policy segments keep the ids *as sampled* and their logprobs;
env segments are observations tokenized once and appended. Nothing is re-rendered after sampling, so
``decode(all_ids)`` is exactly what the model saw, and ``completion_mask`` is 1 exactly on sampled tokens.

Under ``agent.protocol: deepresearcher`` the trajectory is laid out as the original trainer trained it
(``agent.protocols.deepresearcher_transcript``): the conversation re-tokenized from text, policy segments are
the tokens its loss mask trained (each assistant turn, ``<think>`` to ``<|im_end|>``), and they carry no
sampling logprobs.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, Field

SegmentSource = Literal["prompt", "policy", "env"]


class Segment(BaseModel):
    """A run of tokens from one source."""

    source: SegmentSource
    token_ids: list[int]
    logprobs: list[float] | None = Field(None, description="Per-token sampling logprobs; policy segments only.")


class ToolCallRecord(BaseModel):
    """One parsed tool call and what the environment answered."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    observation: Any = Field(None, description="The tool's raw, JSON-able result (hits, notes).")
    text: str = Field("", description="The observation as the policy read it, inside <tool_response>.")
    error: str | None = None
    seconds: float = 0.0


class TurnRecord(BaseModel):
    """One assistant turn: the sampled text, what it asked for, and how long each part took."""

    text: str
    tool_call: ToolCallRecord | None = None
    format_error: str | None = Field(None, description="`kind: message` when the turn was malformed.")
    finish_reason: str = Field("", description="Why sampling stopped: `stop` (stop string or EOS) or `length`.")
    generate_seconds: float = 0.0


class Trajectory(BaseModel):
    """A whole episode: segments for training, turns for people, outcome for rewards."""

    task_id: str = ""
    question: str = ""
    golds: list[str] = Field(default_factory=list)
    segments: list[Segment] = Field(default_factory=list)
    turns: list[TurnRecord] = Field(default_factory=list)
    answer: str | None = None
    termination: str = Field("", description="Why the episode ended: answer, max_turns, context_budget, ...")
    format_errors: int = 0
    response_text: str = Field(
        "",
        description="Everything after the first assistant opening, decoded with special tokens kept (the prefilled "
        "`<think>`, turns, the template's turn markers, observations): the text the original DeepResearcher's "
        "reward manager scored "
        "(`reward.metric: deepresearcher`). Filled by the rollout engine when the episode ends.",
    )
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def prompt_ids(self) -> list[int]:
        """Ids of the leading prompt segments (system and user turn)."""
        ids: list[int] = []
        for segment in self.segments:
            if segment.source != "prompt":
                break
            ids.extend(segment.token_ids)
        return ids

    def _completion_segments(self) -> list[Segment]:
        start = 0
        while start < len(self.segments) and self.segments[start].source == "prompt":
            start += 1
        return self.segments[start:]

    @property
    def completion_ids(self) -> list[int]:
        """Every id after the prompt: policy turns and the observations between them."""
        return [t for s in self._completion_segments() for t in s.token_ids]

    @property
    def completion_mask(self) -> list[int]:
        """1 on tokens the policy sampled, 0 on observation tokens."""
        return [int(s.source == "policy") for s in self._completion_segments() for _ in s.token_ids]

    @property
    def completion_logprobs(self) -> list[float]:
        """Sampling logprobs aligned with ``completion_ids``; 0.0 on observation tokens, NaN on policy tokens
        whose sampling logprob is unknown (a re-tokenized turn): no number may stand in for one that was never
        sampled, and TRL's importance-sampling correction leaves NaN tokens uncorrected."""
        out: list[float] = []
        for s in self._completion_segments():
            if s.source == "policy":
                out.extend(s.logprobs if s.logprobs is not None else [float("nan")] * len(s.token_ids))
            else:
                out.extend([0.0] * len(s.token_ids))
        return out

    @property
    def all_ids(self) -> list[int]:
        return [t for s in self.segments for t in s.token_ids]

    def to_json_line(self) -> bytes:
        return orjson.dumps(self.model_dump(mode="json")) + b"\n"


def save_trajectories(path: str | Path, trajectories: Iterable[Trajectory], *, append: bool = False) -> Path:
    """Write trajectories as JSONL, one per line (appending keeps earlier lines)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab" if append else "wb") as handle:
        for trajectory in trajectories:
            handle.write(trajectory.to_json_line())
    return path


def load_trajectories(path: str | Path) -> list[Trajectory]:
    """Read a JSONL file written by ``save_trajectories``."""
    lines = Path(path).read_bytes().splitlines()
    return [Trajectory.model_validate(orjson.loads(line)) for line in lines if line.strip()]
