"""The bridge between training and the agent: episodes against the real tools, and their rewards.

``Rollouts`` owns one environment and toolbox per environment of the run (a world's own index, or
the configured search backend for real questions; see ``train.tasks``) for a whole run (built once,
used by every step) and one event loop, so async resources stay bound to a single loop across steps.
Worlds that share names but not facts (``world.names_seed``) reuse the same URLs, so each task carries
the index of its environment (``task["world"]``) and its tool calls go there. It collects policy
episodes with the live model (``collect``), the oracle's episodes for SFT (``oracle_episodes``,
``replay``) and recorded demonstrations (``replay_recorded``), all through the same rollout engine and
chat template.
"""

from __future__ import annotations

import asyncio
import logging
import random
from pathlib import Path
from typing import Any

from deepresearcher.agent.session import Decoding, make_template
from deepresearcher.agent.template import THINK_OPEN
from deepresearcher.agent.trajectory import Trajectory
from deepresearcher.config import Config
from deepresearcher.reward import score_rollouts

logger = logging.getLogger(__name__)

# What a run adds to a world task's dict: the environment that answers it (``train.tasks``) and how often a
# balanced order repeated it (``train.stratify.balanced_cycle``); not fields of ``world.Task``.
RUN_KEYS = frozenset({"world", "repeat"})


def task_dict(task: Any) -> dict[str, Any]:
    """A world ``Task`` (or a dict) as the plain dict the trainer keys by id."""
    if isinstance(task, dict):
        return task
    return task.to_dict()


def score_trajectories(
    trajectories: list[Trajectory], tasks: list[dict[str, Any]], config: Config
) -> list[dict[str, float]]:
    """Reward and metrics of each episode (aligned with its task) from ``reward.score_rollouts``, the scorer eval
    uses too: every answer metric (``reward.ANSWER_METRICS``), so the one ``reward.metric`` names is logged
    whichever it is. A judge metric (``reward.metric: judge``) asks its judge about the whole batch at once. A
    program's episode (``train.agent``) is scored on the program's answer (``endpoint.programs.answer_view``)."""
    from deepresearcher.endpoint.programs import answer_view

    scored = score_rollouts(
        [answer_view(trajectory) for trajectory in trajectories],
        [list(task.get("golds", [])) for task in tasks],
        answerable=[task.get("answerable") for task in tasks],
        questions=[task.get("question") or trajectory.question for trajectory, task in zip(trajectories, tasks)],
        config=config.reward,
    )
    return [
        {
            "reward": score.reward,
            **score.metrics,
            "format_error": 0.0 if score.format_ok else 1.0,
            "tool_calls": float(sum(1 for turn in trajectory.turns if turn.tool_call)),
        }
        for trajectory, score in zip(trajectories, scored, strict=True)
    ]


def score_trajectory(trajectory: Trajectory, task: dict[str, Any], config: Config) -> dict[str, float]:
    """:func:`score_trajectories` of one episode."""
    return score_trajectories([trajectory], [task], config)[0]


def world_config(config: Config, world_dir: Path) -> Config:
    """``config`` pointed at the world built in ``world_dir`` (its pages and its own local index), whatever
    backend serves the run's other questions."""
    return config.model_copy(update={
        "world": config.world.model_copy(update={"dir": world_dir}),
        "search": config.search.model_copy(update={"index": world_dir / "index", "backend": "local"}),
    })


class Rollouts:
    """Episodes of a policy (or the oracle) against the configured environment, or one per entry of
    ``world_dirs``: a world's directory, or None for the configured search environment (real questions)."""

    def __init__(self, config: Config, *, seed: int = 0, world_dirs: list[Path | None] | None = None) -> None:
        from deepresearcher.agent.session import make_toolbox
        from deepresearcher.web import make_environment

        self.config = config
        self.seed = seed
        self.world_dirs = world_dirs
        self.loop = asyncio.new_event_loop()
        configs = [config if d is None else world_config(config, d) for d in world_dirs] if world_dirs else [config]
        self.envs = [make_environment(c) for c in configs]
        self.toolboxes = [make_toolbox(env, c) for env, c in zip(self.envs, configs, strict=True)]
        self.calls = 0

    def sibling(self) -> Rollouts:
        """Another ``Rollouts`` on the same environments with its own event loop and tool clients, for a thread of
        its own (the asynchronous trainer's rollout worker runs beside held-out evaluations on this one)."""
        return Rollouts(self.config, seed=self.seed, world_dirs=self.world_dirs)

    def toolbox(self, task: dict[str, Any]) -> Any:
        """The toolbox of the world ``task`` belongs to (world 0 when it names none)."""
        return self.toolboxes[task.get("world", 0)]

    def collect(self, tasks: list[dict[str, Any]], model: Any, tokenizer: Any, step: int | None = None,
                *, vllm_llm: Any = None, decoding: Decoding = "train") -> list[Trajectory]:
        """One episode per task with ``model``'s current weights, in task order.

        Sampling is seeded by (run seed, ``step``), so a resumed run samples step N as the uninterrupted
        run would; without ``step`` each call draws the next seed. With ``vllm_llm`` (the trainer's
        colocated ``vllm.LLM``, holding the same weights) the turns are sampled there instead.
        ``decoding="eval"`` runs the episodes as ``eval`` and ``research`` do (``eval.temperature``). With
        ``train.agent`` each episode is a run of that program against this policy (``endpoint.programs``).
        """
        from deepresearcher.agent.session import AgentSession
        from deepresearcher.generate.factory import make_policy
        from deepresearcher.inference.engine import LocalEngine

        self.calls += 1
        seed = self.seed * 100_003 + (self.calls if step is None else step)
        program = self.config.train.agent
        by_world: dict[int, list[int]] = {}
        for i, task in enumerate(tasks):
            by_world.setdefault(task.get("world", 0), []).append(i)
        # every episode starts at once; each world's loop keeps agent.max_concurrent_generations turns in flight
        in_flight = min(len(tasks), self.config.agent.max_concurrent_generations * len(by_world))
        if program is not None:
            in_flight = min(len(tasks), program.max_concurrent)
        generator, _ = make_policy(self.config, model=model, tokenizer=tokenizer, vllm_llm=vllm_llm, seed=seed,
                                   max_batch_size=max(in_flight, 1))

        async def run_all() -> list[Trajectory]:
            # One engine per world, all sharing the generator, so a step's rollouts are still sampled as one batch.
            session = AgentSession(self.config, generator, tokenizer, self.toolboxes, decoding=decoding)
            try:
                groups = await asyncio.gather(*(
                    session.run([tasks[i] for i in idx], toolbox=self.toolboxes[w]) for w, idx in by_world.items()
                ))
            finally:
                await generator.aclose()
            ordered: list[Trajectory | None] = [None] * len(tasks)
            for idx, trajectories in zip(by_world.values(), groups, strict=True):
                for i, trajectory in zip(idx, trajectories, strict=True):
                    ordered[i] = trajectory
            return ordered  # type: ignore[return-value]

        async def run_programs_all() -> list[Trajectory]:
            # train.agent: the program once per task, against this policy behind the endpoint (endpoint.programs)
            from deepresearcher.endpoint.programs import program_tasks, run_programs
            from deepresearcher.endpoint.server import endpoint_for

            assert program is not None
            endpoint = endpoint_for(self.config, generator, tokenizer, model_name="policy",
                                    training=decoding == "train", layout=program.layout, turn_limit=True)
            try:
                return await run_programs(program, endpoint, program_tasks(tasks, self.toolboxes))
            finally:
                await generator.aclose()

        work = run_all() if program is None else run_programs_all()
        if isinstance(generator, LocalEngine):  # decode on this (the trainer's) thread; see run_driving
            return generator.run_driving(self.loop, work)
        return self.loop.run_until_complete(work)

    def oracle_episodes(self, tasks: list[dict[str, Any]], snippet_only_fraction: float = 0.0, seed: int = 0) -> list[Any]:
        """The scripted oracle's episodes (assistant turns and observations as text) for ``tasks``.

        A seeded ``snippet_only_fraction`` of them come from the oracle that never browses and answers
        from search snippets (or says it cannot find the answer): demonstrations of a hasty researcher.
        """
        from deepresearcher.train.oracle import OracleResearcher
        from deepresearcher.agent.tools import ToolBox
        from deepresearcher.world import Task

        rng = random.Random(seed)
        browses = [rng.random() >= snippet_only_fraction for _ in tasks]

        async def run_all() -> list[Any]:
            return list(await asyncio.gather(*(
                OracleResearcher(ToolBox(self.envs[t.get("world", 0)], self.config), use_browse=browse,
                                 terse=self.config.train.compact_prompt,
                                 two_entity_order=self.config.train.sft.two_entity_order)
                .run(Task.from_dict({k: v for k, v in t.items() if k not in RUN_KEYS}))
                for t, browse in zip(tasks, browses, strict=True)
            )))

        return self.loop.run_until_complete(run_all())

    def replay(self, tasks: list[dict[str, Any]], episodes: list[Any], tokenizer: Any) -> list[Trajectory]:
        """Oracle episodes replayed through the rollout engine as token-level trajectories (SFT data).

        The engine tokenizes each oracle turn as if sampled and appends the real tools' observations,
        so SFT data has exactly the layout RL rollouts have.
        """
        turns = [[turn.assistant for turn in episode.turns] for episode in episodes]
        return self.loop.run_until_complete(
            replay_turns(self.config, tasks, turns, [self.toolbox(t) for t in tasks], tokenizer))

    def close(self) -> None:
        for env in self.envs:
            self.loop.run_until_complete(env.aclose())
        self.loop.close()


async def replay_turns(config: Config, tasks: list[dict[str, Any]], turns: list[list[str]], toolboxes: list[Any],
                       tokenizer: Any) -> list[Trajectory]:
    """Each task's assistant turns (text) replayed through the rollout engine against its toolbox: token-level
    trajectories in this tokenizer's template, laid out exactly as RL rollouts are (SFT data)."""
    from deepresearcher.agent.loop import run_rollouts
    from deepresearcher.generate.scripted import ScriptedGenerator

    template = make_template(tokenizer, config)
    # The turns are data, not samples: neither the turn limit nor the per-turn token cap may cut them.
    agent = config.agent.model_copy(update={"max_turns": max(config.agent.max_turns, 32, *map(len, turns)),
                                            "max_tokens_per_turn": config.agent.context_budget})

    async def one(task: dict[str, Any], texts: list[str], toolbox: Any) -> Trajectory:
        generator = ScriptedGenerator(tokenizer, [_strip_think(text) for text in texts])
        (trajectory,) = await run_rollouts([task], generator, toolbox, tokenizer, agent, template=template)
        return trajectory

    return list(await asyncio.gather(*(one(*item) for item in zip(tasks, turns, toolboxes, strict=True))))


def _strip_think(text: str) -> str:
    """The engine's prompt already ends with ``<think>``, so a turn's text starts right after it."""
    return text[len(THINK_OPEN) :] if text.startswith(THINK_OPEN) else text
