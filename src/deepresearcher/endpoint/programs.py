"""Episodes of an agent given as a program: one run of the program per task, against the policy endpoint and the
episode's tools, served on loopback by the event loop that drives the policy.

``run_programs`` is what ``train.agent`` (GRPO) and ``eval --agent`` share. For each task it opens an episode (an
id, the question and the toolbox of the task's world: ``endpoint.tools``), runs the program with the episode's
URLs (``endpoint.program``), waits for it (at most ``timeout_s``; ``max_concurrent`` at once), and takes the
endpoint's record of it (``PolicyEndpoint.finish``, token-exact under the drift rule of ``endpoint.episodes``).

**What an episode trains.** The trainers take one token sequence per episode (TRL's ``rollout_func``: a
completion per prompt). An episode that never drifted is one segment, trained whole. One that drifted keeps its
last segment: its prompt is what the policy last read (the re-rendered history, earlier turns as context, loss
0), its sampled turns and observations after it are trained; the turns sampled before the last drift are not
(``metadata["untrained_turns"]`` counts them). A program that never asked the policy (it crashed first) gives an
empty completion, which trains nothing.

**What an episode is scored on.** The program's answer, not the policy's last turn: a program may post-process
what the model wrote. ``answer_view`` shows the rewards (``reward.score_rollout``, every metric) that answer as the
agent's last turn, ``</think>\\n<answer>ANSWER</answer>``; a program that crashed, hung or printed nothing has no
answer, which the format gate scores as ``reward.format_penalty``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deepresearcher.agent.tools import ToolBox
from deepresearcher.agent.trajectory import Segment, Trajectory, TurnRecord
from deepresearcher.config import AgentProgramConfig
from deepresearcher.endpoint.app import PolicyEndpoint, create_app, episode_base_url
from deepresearcher.endpoint.openai_types import ChatMessage
from deepresearcher.endpoint.program import EpisodeAddress, ProgramOutcome, run_program
from deepresearcher.endpoint.server import LoopbackServer
from deepresearcher.endpoint.tools import ToolCall, ToolSessions, mount_episode_tools
from deepresearcher.reward import THINK_PREFILL

PROGRAM_KEY = "program"
"""``Trajectory.metadata`` key of a program's episode: how its program ended (``ProgramOutcome.status``)."""


@dataclass(frozen=True)
class ProgramTask:
    """One episode to run: the task's id and question, and the toolbox of its world."""

    task_id: str
    question: str
    toolbox: ToolBox
    golds: tuple[str, ...] = ()


class ProgramEpisodes:
    """``async with ProgramEpisodes(settings, endpoint) as episodes:`` serves ``endpoint`` and the episodes' tools on
    loopback (on the running loop: the one that drives the policy); ``await episodes.run(task)`` is one episode."""

    def __init__(self, settings: AgentProgramConfig, endpoint: PolicyEndpoint) -> None:
        self.settings = settings
        self.endpoint = endpoint
        self.sessions = ToolSessions()
        app = create_app(endpoint)
        mount_episode_tools(app, self.sessions)
        self._server = LoopbackServer(app)
        self._slots = asyncio.Semaphore(settings.max_concurrent)
        self.url = ""

    async def __aenter__(self) -> ProgramEpisodes:
        self.url = await self._server.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._server.__aexit__(None, None, None)

    async def run(self, task: ProgramTask) -> Trajectory:
        """Run the program on ``task`` in an episode of its own (module docstring); never raises for the program."""
        episode_id = f"{task.task_id}-{uuid.uuid4().hex[:12]}"
        address = EpisodeAddress(policy_url=episode_base_url(self.url, episode_id),
                                 mcp_url=f"{self.url}/episodes/{episode_id}/mcp",
                                 tools_url=f"{self.url}/episodes/{episode_id}/tools",
                                 episode_id=episode_id, model=self.endpoint.model_name)
        async with self._slots:
            self.sessions.open(episode_id, task.question, task.toolbox)
            try:
                outcome = await run_program(self.settings.program, task.question, address, self.settings.timeout_s)
            finally:
                calls = self.sessions.close(episode_id)
        return episode_trajectory(self.endpoint, task, outcome, self.endpoint.finish(episode_id), calls)


async def run_programs(settings: AgentProgramConfig, endpoint: PolicyEndpoint,
                       tasks: Sequence[ProgramTask]) -> list[Trajectory]:
    """Each task's episode (module docstring), in task order; run on the loop that drives ``endpoint``'s policy."""
    async with ProgramEpisodes(settings, endpoint) as episodes:
        return list(await asyncio.gather(*(episodes.run(task) for task in tasks)))


def episode_trajectory(endpoint: PolicyEndpoint, task: ProgramTask, outcome: ProgramOutcome,
                       segments: list[Trajectory], calls: Sequence[ToolCall] = ()) -> Trajectory:
    """The trajectory an episode trains (its last segment) carrying the program's outcome (module docstring), each
    tool call the policy asked for with the answer the program got for it (``calls``: what the episode's tools
    answered, matched in order by name and arguments), as the agent loop records them for the behaviours."""
    if segments:
        trajectory = segments[-1]
    else:  # the program never asked the policy: the prompt a lone question renders to, and nothing sampled
        prompt = endpoint.renderer.prompt_ids([ChatMessage(role="user", content=task.question)], None)
        trajectory = Trajectory(segments=[Segment(source="prompt", token_ids=prompt)], termination="no_request")
    _attach_observations([turn for segment in segments for turn in segment.turns], calls)
    trajectory.task_id, trajectory.question, trajectory.golds = task.task_id, task.question, list(task.golds)
    trajectory.answer = outcome.answer
    trajectory.metadata.update({
        PROGRAM_KEY: outcome.status, "program_seconds": round(outcome.seconds, 3),
        "untrained_turns": sum(len(s.turns) for s in segments[:-1]), "segments": len(segments),
    })
    if outcome.status != "answered":
        trajectory.metadata["program_stderr"] = outcome.stderr_tail[-1000:]
    return trajectory


def program_failures(metadata: Sequence[Mapping[str, Any]]) -> str | None:
    """One line for a person when a program's episodes ended without an answer: how many, how (crashed, timeout,
    no_answer), and the last stderr line most of them ended with (``No module named 'openai'``: what to fix).
    ``metadata``: the episodes' ``Trajectory.metadata``; ``None`` when every program run answered."""
    ended = [m for m in metadata if m.get(PROGRAM_KEY) not in (None, "answered")]
    if not ended:
        return None
    how = Counter(str(m[PROGRAM_KEY]) for m in ended)
    last_lines = Counter(_last_line(str(m.get("program_stderr", ""))) for m in ended)
    said, _ = last_lines.most_common(1)[0]
    return (f"{len(ended)} of {len(metadata)} runs of the agent program ended without an answer "
            f"({', '.join(f'{n} {status}' for status, n in how.most_common())}); the most common end of their "
            f"stderr: {said or '(empty)'}. Each episode's record keeps its stderr (trajectory.metadata.program_stderr).")


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _attach_observations(turns: Sequence[TurnRecord], calls: Sequence[ToolCall]) -> None:
    pending = list(calls)
    for turn in turns:
        asked = turn.tool_call
        if asked is None:
            continue
        match = next((c for c in pending if c.name == asked.name and c.arguments == asked.arguments), None)
        if match is not None:
            pending = pending[pending.index(match) + 1:]
            asked.observation, asked.text, asked.error = match.outcome.raw, match.outcome.text, match.outcome.error


def answer_view(trajectory: Trajectory) -> Trajectory:
    """What the rewards read of a program's episode: its answer as the agent's last turn (module docstring); any
    other trajectory as it is."""
    if PROGRAM_KEY not in trajectory.metadata:
        return trajectory
    answer = (trajectory.answer or "").strip()
    text = f"</think>\n<answer>{answer}</answer>" if answer else ""
    return trajectory.model_copy(update={"turns": [TurnRecord(text=text)], "response_text": THINK_PREFILL + text})


def program_tasks(tasks: Sequence[dict[str, Any]], toolboxes: Sequence[ToolBox]) -> list[ProgramTask]:
    """Task dicts (``train.rollout``'s: ``id``, ``question``, ``golds``, ``world``) as program tasks."""
    return [ProgramTask(str(t.get("id", i)), str(t["question"]), toolboxes[t.get("world", 0)],
                        tuple(t.get("golds", ()))) for i, t in enumerate(tasks)]
