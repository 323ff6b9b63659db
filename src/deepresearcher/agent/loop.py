"""The rollout engine: many multi-turn episodes on one asyncio loop, each its own state machine.

Each rollout moves through::

    PENDING ──► GENERATING ──► PROCESSING_TOOLS ──► GENERATING ──► … ──► TERMINATED
       │             │  answer / max_turns / context_budget / format_error ──►┘
       └─ context_budget (prompt alone too long) ──────────────────────────────┘

What the policy reads and writes (prompt, tool schemas, turn parsing, stop strings, tool state) is the
template's ``AgentProtocol`` (``agent.protocol``); the engine itself is the same for every protocol.

Rollouts never wait for each other: while one waits on a tool, others generate. Two semaphores bound
the load (``max_concurrent_generations``, ``max_concurrent_tools``); batching is the generator's job.
Termination reasons (``Trajectory.termination``):

- ``answer``: the policy wrote ``<answer>…</answer>``.
- ``max_turns``: ``max_turns`` turns were sampled without an answer (the last turn's tool call is not run,
  unless the protocol says so: ``AgentProtocol.call_at_max_turns``).
- ``context_budget``: the next turn or observation would not fit in ``context_budget`` tokens; nothing is cut.
- ``format_error``: a malformed turn, with ``end_on_format_error`` on (the paper's behaviour). A turn the
  protocol's parser fails on (it raises) is a malformed turn of kind ``unparsable`` and ends that episode
  whatever the setting, never the batch.

Which ids each turn reads and which are trained is the protocol's transcript (``agent.transcript``).
A tool failure (an exception from the toolbox) becomes an error observation; a generator failure is not
the policy's fault and propagates (``GenerationError``).
"""

from __future__ import annotations

import asyncio
import collections
import enum
import hashlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, Field

from deepresearcher.agent.parsing import ParsedTurn
from deepresearcher.agent.template import ChatTemplate
from deepresearcher.agent.trajectory import ToolCallRecord, Trajectory, TurnRecord
from deepresearcher.agent.transcript import Transcript
from deepresearcher.config import AgentConfig
from deepresearcher.generate.base import GenerationResult, Generator, SamplingParams

logger = logging.getLogger(__name__)


class AgentState(enum.Enum):
    PENDING = "pending"
    GENERATING = "generating"
    PROCESSING_TOOLS = "processing_tools"
    TERMINATED = "terminated"


class RolloutTask(BaseModel):
    """One question to research."""

    task_id: str = ""
    question: str
    golds: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def coerce(cls, task: Any) -> RolloutTask:
        """Accept a RolloutTask, a question string, a dict, or any object with ``question`` (and ``id``/``golds``)."""
        if isinstance(task, RolloutTask):
            return task
        if isinstance(task, str):
            return cls(question=task)
        get = task.get if isinstance(task, dict) else (lambda key, default=None: getattr(task, key, default))
        golds = get("golds") or ([get("answer")] if get("answer") else [])
        return cls(
            task_id=str(get("task_id") or get("id") or ""),
            question=get("question"),
            golds=[str(g) for g in golds],
        )


class ToolOutcomeLike(Protocol):
    text: str
    error: str | None
    raw: Any


class ToolBoxLike(Protocol):
    """What the loop needs from ``deepresearcher.agent.tools.ToolBox``."""

    async def call(self, name: str, arguments: dict[str, Any], context: Any) -> ToolOutcomeLike: ...


class TurnGuide(Protocol):
    """What the loop needs from ``deepresearcher.agent.guide.Guide``: a whole turn written around the policy's
    samples (``agent.guide``)."""

    async def turn(self, generator: Generator, context: list[int], params: SamplingParams, trajectory: Trajectory,
                   *, final: bool) -> GenerationResult: ...


EventCallback = Callable[[str, Trajectory, "TurnRecord | None"], None]
"""``on_event(kind, trajectory, turn)``: ``generate`` (a turn starts; turn None), ``turn`` (sampled and parsed),
``tool`` (its observation is in) or ``end`` (turn None)."""


@dataclass
class _Rollout:
    task: RolloutTask
    trajectory: Trajectory
    context: Any
    session: int
    transcript: Transcript | None = None
    pending: ParsedTurn | None = None
    started: float = field(default_factory=time.perf_counter)


class RolloutEngine:
    """Runs episodes of one policy against one toolbox; safe to share across concurrent ``run`` calls."""

    def __init__(
        self,
        generator: Generator,
        toolbox: ToolBoxLike,
        template: ChatTemplate,
        config: AgentConfig,
        *,
        on_event: EventCallback | None = None,
        make_context: Callable[[str], Any] | None = None,
        guide: TurnGuide | None = None,
    ) -> None:
        """``guide``: turns are written by it around the policy's samples (``agent.guide``); None: sampled whole."""
        self.generator = generator
        self.guide = guide
        self.toolbox = toolbox
        self.template = template
        self.config = config
        self.on_event = on_event
        self.make_context = make_context or template.protocol.new_context
        self._episodes: collections.Counter[tuple[str, str]] = collections.Counter()
        self._generation_slots = asyncio.Semaphore(config.max_concurrent_generations)
        self._tool_slots = asyncio.Semaphore(config.max_concurrent_tools)
        self._handlers = {
            AgentState.PENDING: self._handle_pending,
            AgentState.GENERATING: self._handle_generating,
            AgentState.PROCESSING_TOOLS: self._handle_processing_tools,
        }

    async def run(self, task: Any) -> Trajectory:
        """Run one episode to its end and return its trajectory."""
        task = RolloutTask.coerce(task)
        trajectory = Trajectory(
            task_id=task.task_id,
            question=task.question,
            golds=task.golds,
            metadata={**task.metadata, "exact_tokens": bool(getattr(self.generator, "exact_tokens", True))},
        )
        if self.guide is not None:
            trajectory.metadata["guided"] = True
        rollout = _Rollout(task=task, trajectory=trajectory, context=self.make_context(task.question),
                           session=self._session_of(task))
        state = AgentState.PENDING
        while state is not AgentState.TERMINATED:
            state = await self._handlers[state](rollout)
        trajectory.metadata["seconds"] = round(time.perf_counter() - rollout.started, 6)
        assert rollout.transcript is not None
        rollout.transcript.finish()
        self._emit("end", rollout, None)
        return trajectory

    def _session_of(self, task: RolloutTask) -> int:
        """A stable id for this episode's generation session: the task and how many episodes of it this engine
        started before. Local engines key their KV cache and each request's random stream by it, so a rerun
        (a resumed training step, a resumed eval) samples what the first run sampled."""
        key = (task.task_id, task.question)
        ordinal = self._episodes[key]
        self._episodes[key] += 1
        digest = hashlib.blake2b(f"{key[0]}\x1f{key[1]}\x1f{ordinal}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") >> 1

    def _emit(self, kind: str, rollout: _Rollout, turn: TurnRecord | None) -> None:
        if self.on_event is not None:
            self.on_event(kind, rollout.trajectory, turn)

    def _terminate(self, rollout: _Rollout, reason: str) -> AgentState:
        rollout.trajectory.termination = reason
        return AgentState.TERMINATED

    def _parse(self, text: str) -> ParsedTurn:
        """The protocol's reading of a turn; a parser that raises (on text no parser foresaw, e.g. a tool call
        nested thousands deep) makes it a malformed turn of this episode only."""
        try:
            return self.template.protocol.parse_turn(text, self.template.tools)
        except Exception as exc:  # noqa: BLE001 - the policy's text must not end other rollouts
            logger.warning("parsing a turn failed: %r", exc)
            return ParsedTurn(error_kind="unparsable", error=f"The turn could not be read ({type(exc).__name__}).")

    async def _handle_pending(self, rollout: _Rollout) -> AgentState:
        rollout.transcript = self.template.protocol.transcript(self.template, rollout.trajectory)
        if len(rollout.transcript.context_ids) + self.config.min_turn_tokens > self.config.context_budget:
            return self._terminate(rollout, "context_budget")
        return AgentState.GENERATING

    async def _handle_generating(self, rollout: _Rollout) -> AgentState:
        cfg = self.config
        transcript = rollout.transcript
        assert transcript is not None
        context = list(transcript.context_ids)
        room = cfg.context_budget - len(context)
        if room < cfg.min_turn_tokens:
            return self._terminate(rollout, "context_budget")
        budget_bound = room < cfg.max_tokens_per_turn
        params = SamplingParams(
            max_tokens=min(cfg.max_tokens_per_turn, room),
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            stop=list(self.template.protocol.stop),
            session=rollout.session,  # turns share their context's start: local engines reuse its KV cache
        )
        self._emit("generate", rollout, None)
        start = time.perf_counter()
        async with self._generation_slots:
            if self.guide is None:
                result = await self.generator.generate(context, params)
            else:
                final = len(rollout.trajectory.turns) + 1 >= cfg.max_turns
                result = await self.guide.turn(self.generator, context, params, rollout.trajectory, final=final)
        seconds = time.perf_counter() - start
        text = result.text if result.text is not None else self.template.tokenizer.decode(result.token_ids)
        parsed = self._parse(text)
        transcript.add_turn(result, parsed)
        turn = TurnRecord(text=text, finish_reason=result.finish_reason, generate_seconds=round(seconds, 6))
        trajectory = rollout.trajectory
        trajectory.turns.append(turn)
        if parsed.answer is not None:
            trajectory.answer = parsed.answer
            self._emit("turn", rollout, turn)
            return self._terminate(rollout, "answer")
        if parsed.error_kind is not None:
            turn.format_error = f"{parsed.error_kind}: {parsed.error}"
            trajectory.format_errors += 1
        else:
            turn.tool_call = ToolCallRecord(name=parsed.tool_name or "", arguments=parsed.arguments)
        self._emit("turn", rollout, turn)
        if parsed.error_kind is not None and result.finish_reason == "length" and budget_bound:
            return self._terminate(rollout, "context_budget")
        if parsed.error_kind == "unparsable" or (parsed.error_kind is not None and cfg.end_on_format_error):
            return self._terminate(rollout, "format_error")
        if len(trajectory.turns) >= cfg.max_turns and not (
            self.template.protocol.call_at_max_turns and turn.tool_call is not None
        ):
            return self._terminate(rollout, "max_turns")
        rollout.pending = parsed
        return AgentState.PROCESSING_TOOLS

    async def _call_tool(self, rollout: _Rollout, record: ToolCallRecord) -> str:
        start = time.perf_counter()
        try:
            async with self._tool_slots:
                outcome = await self.toolbox.call(record.name, record.arguments, rollout.context)
            record.observation, record.error, text = outcome.raw, outcome.error, outcome.text
        except Exception as exc:  # noqa: BLE001 - a tool bug must not kill other rollouts; the model sees it
            logger.warning("tool %s failed: %r", record.name, exc)
            record.error = f"{type(exc).__name__}: {exc}"
            text = f"Error: the tool {record.name} failed ({record.error}). Try again or try something else."
        record.seconds = round(time.perf_counter() - start, 6)
        record.text = text
        return text

    async def _handle_processing_tools(self, rollout: _Rollout) -> AgentState:
        parsed, rollout.pending = rollout.pending, None
        assert parsed is not None and rollout.transcript is not None
        turn = rollout.trajectory.turns[-1]
        if turn.tool_call is not None:
            observation = await self._call_tool(rollout, turn.tool_call)
        else:
            observation = f"Error: {parsed.error or 'malformed turn'}"
        length = rollout.transcript.stage_observation(parsed, observation)
        self._emit("tool", rollout, turn)
        last = len(rollout.trajectory.turns) >= self.config.max_turns  # the call ran for its observation only
        if length + (0 if last else self.config.min_turn_tokens) > self.config.context_budget:
            return self._terminate(rollout, "context_budget")
        rollout.transcript.commit()
        if last:
            return self._terminate(rollout, "max_turns")
        return AgentState.GENERATING


def fit_window(cfg: AgentConfig, generator: Generator) -> AgentConfig:
    """``cfg`` with a context budget no larger than the policy's window (``generator.max_context``, if any)."""
    window = getattr(generator, "max_context", None)
    if not window or cfg.context_budget <= window:
        return cfg
    logger.info("context budget %d lowered to the policy's window %d", cfg.context_budget, window)
    return cfg.model_copy(update={"context_budget": window})


async def run_rollouts(
    tasks: Iterable[Any],
    generator: Generator,
    toolbox: ToolBoxLike,
    tokenizer: Any,
    cfg: AgentConfig,
    *,
    on_event: EventCallback | None = None,
    make_context: Callable[[str], Any] | None = None,
    template: ChatTemplate | None = None,
) -> list[Trajectory]:
    """Run one episode per task, all concurrently; trajectories come back in task order.

    If one rollout raises (a generator failure), the others are cancelled and the error propagates.
    A generator with a ``max_context`` (a local model's window) lowers ``cfg.context_budget`` to it.
    ``template`` (default: the native protocol's over ``tokenizer``) carries the protocol.
    """
    template = template or ChatTemplate(tokenizer)
    engine = RolloutEngine(generator, toolbox, template, fit_window(cfg, generator), on_event=on_event, make_context=make_context)
    return await run_episodes(engine, tasks)


async def run_episodes(engine: RolloutEngine, tasks: Iterable[Any]) -> list[Trajectory]:
    """One episode per task on ``engine``, all concurrently; trajectories come back in task order.

    If one rollout raises (a generator failure), the others are cancelled and the error propagates.
    """
    jobs = [asyncio.ensure_future(engine.run(task)) for task in tasks]
    try:
        return list(await asyncio.gather(*jobs))
    finally:
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
