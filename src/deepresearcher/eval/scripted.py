"""Scripted baseline researchers of world tasks, and the trajectories of any scripted researcher.

The no-tools baselines (``eval.baselines``) say what guessing scores; the oracle (``train.oracle``) what reading
the world's pages as they are meant to be read scores. Between them, :class:`FirstHitResearcher` researches as
an agent that trusts search does: it searches each hop's natural query, reads the first hit's page and answers
the value that page states for the asked entity and relation (``world.reading.extract_value``), never opening a
second hit. On the world's ``conflict`` tasks the unreliable page ranks first about half the time
(``world.pages``), so it scores about half there; on every other type it scores about what the oracle scores.

:class:`RecordingToolBox` keeps every call a scripted researcher makes (its arguments and the tools' raw result),
so :func:`scripted_trajectory` turns its episode into a :class:`Trajectory` the behaviour measures
(``eval.behaviours``) read exactly as they read a model's, with no tokenizer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from deepresearcher.agent.template import THINK_OPEN
from deepresearcher.agent.tools import ToolContext, ToolOutcome
from deepresearcher.agent.trajectory import ToolCallRecord, Trajectory, TurnRecord
from deepresearcher.world import UNANSWERABLE_ANSWER, Task
from deepresearcher.world.knowledge import RELATIONS
from deepresearcher.world.reading import extract_value
from deepresearcher.world.tasks import comparison_winner

__all__ = ["FirstHitResearcher", "RecordingToolBox", "ScriptedEpisode", "ScriptedTurn", "scripted_trajectories",
           "scripted_trajectory"]


@dataclass
class ScriptedTurn:
    """One assistant turn in the policy's format, and the observation the tools answered (as ``OracleTurn``)."""

    assistant: str
    observation: str | None = None


@dataclass
class ScriptedEpisode:
    task_id: str
    answer: str
    turns: list[ScriptedTurn] = field(default_factory=list)


@dataclass
class _Recorded:
    name: str
    arguments: dict[str, Any]
    outcome: ToolOutcome


class RecordingToolBox:
    """A ``ToolBox`` that remembers each call (in order) with the tools' raw result; ``calls`` are this episode's."""

    def __init__(self, toolbox: Any) -> None:
        self.toolbox = toolbox
        self.config = getattr(toolbox, "config", None)  # what a researcher may ask of it (browse.max_urls)
        self.calls: list[_Recorded] = []

    async def call(self, name: str, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        outcome = await self.toolbox.call(name, arguments, context)
        self.calls.append(_Recorded(name, dict(arguments), outcome))
        return outcome


def _tool_call(name: str, arguments: dict[str, Any]) -> str:
    return "<tool_call>" + orjson.dumps({"name": name, "arguments": arguments}).decode() + "</tool_call>"


def scripted_trajectory(task: Task | dict[str, Any], episode: Any, calls: Sequence[_Recorded]) -> Trajectory:
    """A scripted episode (``OracleEpisode``, ``ScriptedEpisode``: turns with ``assistant`` text) and the calls its
    ``RecordingToolBox`` kept, as a trajectory: each turn with a tool call carries that call's raw observation, and
    each turn's text starts after the ``<think>`` the engine's prompt ends with, as a sampled turn's does (so the
    reward's format check reads it as it reads a model's)."""
    question = task.question if isinstance(task, Task) else task["question"]
    pending = list(calls)
    turns = []
    for turn in episode.turns:
        record = None
        if "<tool_call>" in turn.assistant and pending:
            done = pending.pop(0)
            record = ToolCallRecord(name=done.name, arguments=done.arguments, observation=done.outcome.raw,
                                    text=done.outcome.text, error=done.outcome.error)
        text = turn.assistant[len(THINK_OPEN):] if turn.assistant.startswith(THINK_OPEN) else turn.assistant
        turns.append(TurnRecord(text=text, tool_call=record))
    task_id = task.id if isinstance(task, Task) else task["id"]
    return Trajectory(task_id=task_id, question=question, turns=turns, answer=episode.answer, termination="answer")


async def scripted_trajectories(make: Callable[[Any], Any], tasks: Sequence[Task | dict[str, Any]],
                                toolbox_of: Callable[[Any], Any]) -> list[Trajectory]:
    """Run a scripted researcher (``make(toolbox)``: e.g. ``FirstHitResearcher``, ``OracleResearcher``) on each
    task, against ``toolbox_of(task)``, and return the episodes as trajectories, in task order."""

    async def one(task: Task | dict[str, Any]) -> Trajectory:
        toolbox = RecordingToolBox(toolbox_of(task))
        world_task = task if isinstance(task, Task) else Task.from_dict(
            {k: v for k, v in task.items() if k in Task.__dataclass_fields__})
        episode = await make(toolbox).run(world_task)
        return scripted_trajectory(task, episode, toolbox.calls)

    return list(await asyncio.gather(*(one(task) for task in tasks)))


class FirstHitResearcher:
    """Answers world tasks from the first hit of each hop's search: the policy that trusts the search engine.

    It knows which hops a task needs (the chain's subjects and relations, as the oracle does), never their
    values: each value is read off the first hit's page. A page that does not state the value ends the chain
    with "cannot find". Comparisons and yes/no questions read each entity's first hit, one after the other.
    """

    def __init__(self, toolbox: Any, terse: bool = True) -> None:
        self.toolbox, self.terse = toolbox, terse

    async def run(self, task: Task) -> ScriptedEpisode:
        episode = ScriptedEpisode(task.id, "")
        context = ToolContext(task.question)
        answer: str | None
        if task.type in ("comparison", "two_page"):
            values = [await self._lookup(hop.subject, hop.relation, context, episode) for hop in task.chain]
            answer = None
            if all(v is not None for v in values):
                if task.type == "two_page":
                    answer = "yes" if values[0] == values[1] else "no"
                else:
                    try:
                        answer = task.chain[comparison_winner(task.question, [int(v) for v in values])].subject  # type: ignore[arg-type]
                    except ValueError:
                        answer = None
        else:
            subject, answer = task.chain[0].subject, None
            for hop in task.chain:
                answer = await self._lookup(subject, hop.relation, context, episode)
                if answer is None:
                    break
                subject = answer
        episode.answer = answer or UNANSWERABLE_ANSWER
        thought = (f"The first result gives {answer}." if answer is not None
                   else "The first result does not say.")
        episode.turns.append(ScriptedTurn(f"<think>{thought}</think>\n<answer>{episode.answer}</answer>"))
        return episode

    async def _lookup(self, subject: str, relation: str, context: ToolContext, episode: ScriptedEpisode) -> str | None:
        query = RELATIONS[relation].query.format(s=subject)
        noun = RELATIONS[relation].noun.format(s=subject)
        think = f"I need {noun}." if self.terse else f"I need {noun}. Let me search for it."
        outcome = await self.toolbox.call("web_search", {"query": [query]}, context)
        episode.turns.append(ScriptedTurn(f"<think>{think}</think>\n" + _tool_call("web_search", {"query": [query]}),
                                          outcome.text))
        hits = [h for result in (outcome.raw or []) for h in result.get("web_page_info_list", [])]
        if not hits:
            return None
        first = hits[0]
        arguments = {"url_list": [first["url"]]}
        outcome = await self.toolbox.call("browse_webpage", arguments, context)
        think = "Reading the first result." if self.terse else f"The first result should state {noun}."
        episode.turns.append(ScriptedTurn(f"<think>{think}</think>\n" + _tool_call("browse_webpage", arguments),
                                          outcome.text))
        for page in outcome.raw or []:
            if "information" in page:
                return extract_value(relation, subject, page["information"], first.get("title", ""))
        return None
