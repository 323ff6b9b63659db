"""What the policy endpoint records of each episode, and the token-exact trajectories stitched from it.

An *episode* is every request one agent run sends under one id (the trainer names it: ``endpoint.app``). Each
request is an *exchange*: the ids the policy read, the ids it sampled and their log-probabilities. Requests of one
episode are served one at a time, in the order they arrive.

**Recognising sampled turns.** An agent re-sends its whole history with every request. An assistant message in it
is recognised as a turn the endpoint sampled when it carries that reply's tool-call ids (names and arguments equal
as JSON: a client that re-serialises the arguments is still recognised) or, for a reply without calls, its exact
content; ``reasoning_content``, if the client sends it back, must be the one returned (a client that drops it is
fine). Recognised turns are spliced into the next prompt as the ids sampled (``endpoint.render``), so they are never
re-tokenized; any other assistant message (written or edited by the client) is rendered from its text.

**The drift rule.** Each request's prompt ids are compared with the previous request's prompt ids followed by its
sampled ids. When they start with exactly those ids, the request *continues* the previous one: the ids after them
are observations (tool results, a new user turn and the next turn's opening: loss 0), and the episode stays one
token sequence of sampled and observed tokens. When they do not (the client edited, trimmed or dropped part of its
history, or the template renders it differently), the request has *drifted*: it is counted (``Episode.drifts``, the
recorder's ``drifted_requests``) and starts a new *segment*. Each segment is one ``Trajectory``: its prompt is the
whole prompt of its first request (what the policy actually read, earlier turns included, as context with loss 0),
then sampled turns and observations as above. So every sampled turn is trained against exactly the context it was
sampled in, with its sampling log-probabilities, and a turn re-tokenized from text is only ever context, never
trained as if it had been sampled.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from deepresearcher.agent.trajectory import Segment, ToolCallRecord, Trajectory, TurnRecord
from deepresearcher.endpoint.openai_types import ChatMessage


@dataclass
class Exchange:
    """One request of an episode and what the policy sampled for it."""

    new_ids: list[int]
    """The prompt ids this request added: the whole prompt when it starts a segment, else the observation ids
    after the previous request's prompt and sample (kept once, so an episode's record grows with its tokens)."""
    sampled_ids: list[int]
    logprobs: list[float] | None
    finish_reason: str
    text: str
    reply: dict[str, Any]
    continues: bool
    """Whether the prompt extends the previous request's prompt and sample (never for the first)."""
    drifted: bool
    """Whether the prompt does not extend them (never for the first): the request starts a new segment."""


@dataclass
class Episode:
    """Every exchange of one agent run, in order."""

    id: str
    exchanges: list[Exchange] = field(default_factory=list)
    question: str = ""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    _context: list[int] = field(default_factory=list, repr=False)  # the last prompt and sample

    @property
    def drifts(self) -> int:
        return sum(x.drifted for x in self.exchanges)

    def sampled_turns(self, messages: Sequence[ChatMessage]) -> dict[int, list[int]]:
        """The assistant messages of ``messages`` that re-send a reply of this episode, by index: their sampled ids.

        Replies are matched in order (a message is looked for among the exchanges after the last one matched), so
        a model that answered the same text twice is matched turn for turn."""
        found: dict[int, list[int]] = {}
        start = 0
        for index, message in enumerate(messages):
            if message.role != "assistant":
                continue
            for n in range(start, len(self.exchanges)):
                if same_reply(message, self.exchanges[n].reply):
                    found[index] = self.exchanges[n].sampled_ids
                    start = n + 1
                    break
        return found

    def record(self, messages: Sequence[ChatMessage], prompt_ids: list[int], sampled_ids: list[int],
               logprobs: list[float] | None, finish_reason: str, text: str, reply: dict[str, Any]) -> Exchange:
        """Add a served request; whether it continues the previous one is decided here (the drift rule)."""
        if not self.exchanges:
            self.question = next((m.text() for m in messages if m.role == "user"), "")
        previous = self._context
        continues = bool(self.exchanges) and prompt_ids[:len(previous)] == previous
        exchange = Exchange(
            new_ids=prompt_ids[len(previous):] if continues else list(prompt_ids), sampled_ids=list(sampled_ids), logprobs=list(logprobs) if logprobs is not None else None,
            finish_reason=finish_reason, text=text, reply=reply, continues=continues,
            drifted=bool(self.exchanges) and not continues)
        self.exchanges.append(exchange)
        self._context = list(prompt_ids) + list(sampled_ids)
        return exchange

    def segments(self) -> list[list[Exchange]]:
        """The exchanges cut where a request drifted: each run continues one token sequence."""
        runs: list[list[Exchange]] = []
        for exchange in self.exchanges:
            if not exchange.continues:
                runs.append([exchange])
            else:
                runs[-1].append(exchange)
        return runs

    def trajectories(self) -> list[Trajectory]:
        """One trajectory per segment (the drift rule, module docstring), in order; none for an empty episode.

        Each carries ``metadata`` ``{"episode_id", "segment", "segments", "drifts"}``; the last one holds the
        episode's outcome (``answer``, ``termination``), an earlier one ends with ``termination: drift``."""
        runs = self.segments()
        out = []
        for number, run in enumerate(runs):
            trajectory = _trajectory(self.id, self.question, run)
            if number < len(runs) - 1:
                trajectory.answer, trajectory.termination = None, "drift"
            trajectory.metadata = {"episode_id": self.id, "segment": number, "segments": len(runs),
                                   "drifts": self.drifts}
            out.append(trajectory)
        return out


def _trajectory(episode_id: str, question: str, run: list[Exchange]) -> Trajectory:
    segments = [Segment(source="prompt", token_ids=run[0].new_ids)]
    turns = []
    for n, exchange in enumerate(run):
        if n and exchange.new_ids:
            segments.append(Segment(source="env", token_ids=exchange.new_ids))
        segments.append(Segment(source="policy", token_ids=exchange.sampled_ids, logprobs=exchange.logprobs))
        calls = exchange.reply.get("tool_calls") or []
        call = ToolCallRecord(name=calls[0]["function"]["name"],
                              arguments=_arguments(calls[0]["function"]["arguments"])) if calls else None
        turns.append(TurnRecord(text=exchange.text, tool_call=call, finish_reason=exchange.finish_reason))
    last = run[-1]
    called = bool(last.reply.get("tool_calls"))
    termination = "length" if last.finish_reason == "length" else "tool_calls" if called else "answer"
    return Trajectory(task_id=episode_id, question=question, segments=segments, turns=turns,
                      answer=last.reply.get("content") if termination == "answer" else None, termination=termination)


def same_reply(message: ChatMessage, reply: dict[str, Any]) -> bool:
    """Whether a re-sent assistant message is a reply the endpoint returned (module docstring)."""
    if message.role != "assistant" or (message.text() or None) != (reply.get("content") or None):
        return False
    if message.reasoning_content is not None and message.reasoning_content != reply.get("reasoning_content"):
        return False
    sent = [(c.id, c.function.name, _arguments(c.function.arguments)) for c in message.tool_calls or []]
    returned = [(c["id"], c["function"]["name"], _arguments(c["function"]["arguments"]))
                for c in reply.get("tool_calls") or []]
    return sent == returned


def _arguments(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


class EpisodeRecorder:
    """Episodes by id, for the endpoint's requests (its event loop) and the trainer that takes them (any thread).

    ``max_episodes`` bounds a long-running server that nobody takes episodes from: past it, the episode used
    least recently is dropped (counted in ``evicted_episodes``). A trainer that pops its episodes needs no bound."""

    def __init__(self, max_episodes: int | None = None) -> None:
        self.max_episodes = max_episodes
        self._episodes: OrderedDict[str, Episode] = OrderedDict()
        self._lock = threading.Lock()
        self.requests = 0
        self.drifted_requests = 0
        self.evicted_episodes = 0

    def episode(self, episode_id: str) -> Episode:
        """The episode ``episode_id`` (a new one the first time), now the most recently used."""
        with self._lock:
            episode = self._episodes.get(episode_id)
            if episode is None:
                episode = self._episodes[episode_id] = Episode(episode_id)
                while self.max_episodes is not None and len(self._episodes) > self.max_episodes:
                    self._episodes.popitem(last=False)
                    self.evicted_episodes += 1
            self._episodes.move_to_end(episode_id)
            return episode

    def count(self, exchange: Exchange) -> None:
        with self._lock:
            self.requests += 1
            self.drifted_requests += int(exchange.drifted)

    def get(self, episode_id: str) -> Episode | None:
        with self._lock:
            return self._episodes.get(episode_id)

    def pop(self, episode_id: str) -> Episode:
        """The episode's record, removed from the recorder (an episode that sent no request: an empty one).
        Take it when the agent is done: a request still in flight would be recorded into the popped object."""
        with self._lock:
            return self._episodes.pop(episode_id, None) or Episode(episode_id)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"requests": self.requests, "drifted_requests": self.drifted_requests,
                    "open_episodes": len(self._episodes), "evicted_episodes": self.evicted_episodes}
