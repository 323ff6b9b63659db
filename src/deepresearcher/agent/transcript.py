"""An episode's transcript: the ids the policy reads before each turn, and the trajectory trained at the end.

The rollout engine asks its protocol for one transcript per episode (``AgentProtocol.transcript``) and
drives it the same way for every protocol::

    context_ids ─► generate ─► add_turn ─► stage_observation ─► commit ─► context_ids ─► … ─► finish

Two kinds exist:

- ``TokenTranscript`` (the native protocol): token-in/token-out. The context is the prompt, then every
  turn's ids exactly as sampled and each observation tokenized once and appended, so each turn's context
  extends the last one and the trained tokens are the sampled ones, with their sampling logprobs.
- ``deepresearcher.agent.protocols.deepresearcher_transcript.RenderedTranscript`` (the original
  DeepResearcher's): a message list re-rendered whole before every turn, and a trained sequence
  re-tokenized from text at the end, as the original built them.
"""

from __future__ import annotations

from typing import Any, Protocol

from deepresearcher.agent.parsing import ParsedTurn
from deepresearcher.agent.prompts import THINK_OPEN
from deepresearcher.agent.trajectory import Segment, Trajectory
from deepresearcher.generate.base import GenerationResult



class ChatTemplate(Protocol):
    """What a transcript reads of ``agent.template.ChatTemplate``, typed by shape: the template module imports
    the protocols, which build transcripts, so naming the class here would close an import cycle."""

    tokenizer: Any
    protocol: Any
    system: str
    supports_tools: bool

    def render(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool) -> str: ...

    def tool_message(self, content: str) -> dict[str, Any]: ...

    def prompt_ids(self, question: str) -> list[int]: ...

    def encode(self, text: str) -> list[int]: ...

    def observation_text(self, observation: str, sampled_ids: list[int]) -> str: ...


class Transcript(Protocol):
    """What the rollout engine needs from an episode's record of tokens."""

    @property
    def context_ids(self) -> list[int]:
        """The ids the next turn is sampled from."""
        ...

    def add_turn(self, result: GenerationResult, parsed: ParsedTurn) -> None:
        """A sampled turn (read as ``parsed``) joins the transcript."""

    def stage_observation(self, parsed: ParsedTurn, observation: str) -> int:
        """Prepare the last turn's observation; return the context length it would make (nothing kept yet)."""
        ...

    def commit(self) -> None:
        """Keep the staged observation: the next turn reads it."""

    def finish(self) -> None:
        """Lay the trajectory's segments and ``response_text`` out as they are to be trained and scored."""


class TokenTranscript:
    """Token-in/token-out: sampled ids are kept as sampled; observations are appended once, never re-rendered."""

    def __init__(self, template: ChatTemplate, trajectory: Trajectory) -> None:
        self.template = template
        self.trajectory = trajectory
        self._ids: list[int] = []
        self._last_sampled: list[int] = []
        self._staged: list[int] = []
        self._append(Segment(source="prompt", token_ids=template.prompt_ids(trajectory.question)))

    @property
    def context_ids(self) -> list[int]:
        return self._ids

    def _append(self, segment: Segment) -> None:
        self.trajectory.segments.append(segment)
        self._ids.extend(segment.token_ids)

    def add_turn(self, result: GenerationResult, parsed: ParsedTurn) -> None:
        self._append(Segment(source="policy", token_ids=list(result.token_ids), logprobs=result.logprobs))
        self._last_sampled = list(result.token_ids)

    def stage_observation(self, parsed: ParsedTurn, observation: str) -> int:
        self._staged = self.template.encode(self.template.observation_text(observation, self._last_sampled))
        return len(self._ids) + len(self._staged)

    def commit(self) -> None:
        self._append(Segment(source="env", token_ids=self._staged))
        self._staged = []

    def finish(self) -> None:
        # The prompt ends with the prefilled <think>, which the original counted as the response's first text.
        self.trajectory.response_text = THINK_OPEN + self.template.tokenizer.decode(
            self.trajectory.completion_ids, skip_special_tokens=False)
