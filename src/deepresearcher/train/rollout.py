"""The bridge between training and the agent: episodes against the real tools, and their rewards.

``WorldRollouts`` owns one environment and toolbox per world for a whole run (built once, used by
every step) and one event loop, so async resources stay bound to a single loop across steps. Worlds
that share names but not facts (``world.names_seed``) reuse the same URLs, so each task carries the
index of its world (``task["world"]``) and its tool calls go to that world's environment. It collects
policy episodes with the live model (``collect``) and the oracle's episodes for SFT
(``oracle_episodes``, ``replay``),
both through the same rollout engine and chat template.
"""

from __future__ import annotations

import asyncio
import logging
import random
from pathlib import Path
from typing import Any

from deepresearcher.agent.template import THINK_OPEN, ChatTemplate
from deepresearcher.agent.trajectory import Trajectory
from deepresearcher.config import Config
from deepresearcher.reward import answer_metrics, check_format, score

logger = logging.getLogger(__name__)

# A from-scratch model learns the protocol from SFT, not from instructions; a one-line system turn
# keeps every episode (and so every rollout and every training step) several hundred tokens shorter.
COMPACT_SYSTEM_PROMPT = "Research the question with web_search and browse_webpage, then answer."


def make_template(tokenizer: Any, compact_prompt: bool) -> ChatTemplate:
    """The agent's chat template for ``tokenizer``; with ``compact_prompt`` the system turn is one line."""
    from deepresearcher.agent.tools import TOOL_SCHEMAS

    template = ChatTemplate(tokenizer, list(TOOL_SCHEMAS))
    if compact_prompt:
        template.system = COMPACT_SYSTEM_PROMPT
    return template


def task_dict(task: Any) -> dict[str, Any]:
    """A world ``Task`` (or a dict) as the plain dict the trainer keys by id."""
    if isinstance(task, dict):
        return task
    return task.to_dict()


def score_trajectory(trajectory: Trajectory, task: dict[str, Any], config: Config) -> dict[str, float]:
    """Reward (the paper's: −1 on broken format) plus the evaluation metrics of one episode."""
    check = check_format([THINK_OPEN + turn.text for turn in trajectory.turns])
    unanswerable = not task.get("answerable", True)
    golds = list(task.get("answers", []))
    reward = score(trajectory.answer, golds, check.ok, config=config.reward, unanswerable=unanswerable)
    metrics = answer_metrics(trajectory.answer if check.ok else None, golds, unanswerable=unanswerable)
    return {
        "reward": reward,
        "f1": metrics["f1"],
        "em": metrics["em"],
        "cover_em": metrics["cover_em"],
        "format_error": 0.0 if check.ok else 1.0,
        "tool_calls": float(sum(1 for turn in trajectory.turns if turn.tool_call)),
    }


def world_config(config: Config, world_dir: Path) -> Config:
    """``config`` pointed at the world built in ``world_dir`` (its pages and its own index)."""
    return config.model_copy(update={
        "world": config.world.model_copy(update={"dir": world_dir}),
        "search": config.search.model_copy(update={"index": world_dir / "index"}),
    })


class WorldRollouts:
    """Episodes of a policy (or the oracle) against the configured environment, or one per world."""

    def __init__(self, config: Config, *, seed: int = 0, world_dirs: list[Path] | None = None) -> None:
        from deepresearcher.agent.tools import ToolBox
        from deepresearcher.web import make_environment

        self.config = config
        self.compact_prompt = config.train.compact_prompt
        self.seed = seed
        self.loop = asyncio.new_event_loop()
        configs = [world_config(config, d) for d in world_dirs] if world_dirs else [config]
        self.envs = [make_environment(c) for c in configs]
        self.toolboxes = [ToolBox(env, c) for env, c in zip(self.envs, configs, strict=True)]
        self.calls = 0

    def toolbox(self, task: dict[str, Any]) -> Any:
        """The toolbox of the world ``task`` belongs to (world 0 when it names none)."""
        return self.toolboxes[task.get("world", 0)]

    def collect(self, tasks: list[dict[str, Any]], model: Any, tokenizer: Any, step: int | None = None,
                *, vllm_llm: Any = None) -> list[Trajectory]:
        """One episode per task with ``model``'s current weights, in task order.

        Sampling is seeded by (run seed, ``step``), so a resumed run samples step N as the uninterrupted
        run would; without ``step`` each call draws the next seed. With ``vllm_llm`` (the trainer's
        colocated ``vllm.LLM``, holding the same weights) the turns are sampled there instead.
        """
        from deepresearcher.agent.loop import run_rollouts

        self.calls += 1
        seed = self.seed * 100_003 + (self.calls if step is None else step)
        if vllm_llm is not None:
            from deepresearcher.generate.vllm_gen import VLLMColocatedGenerator

            generator: Any = VLLMColocatedGenerator(vllm_llm, seed=seed)
        else:
            from deepresearcher.train.sampler import LocalBatchedGenerator

            generator = LocalBatchedGenerator(model, tokenizer, max_batch=max(len(tasks), 1), seed=seed)
        template = make_template(tokenizer, self.compact_prompt)
        by_world: dict[int, list[int]] = {}
        for i, task in enumerate(tasks):
            by_world.setdefault(task.get("world", 0), []).append(i)

        async def run_all() -> list[Trajectory]:
            # One engine per world, all sharing the generator, so a step's rollouts are still sampled as one batch.
            groups = await asyncio.gather(*(
                run_rollouts([tasks[i] for i in idx], generator, self.toolboxes[w], tokenizer, self.config.agent,
                             template=template)
                for w, idx in by_world.items()
            ))
            ordered: list[Trajectory | None] = [None] * len(tasks)
            for idx, trajectories in zip(by_world.values(), groups, strict=True):
                for i, trajectory in zip(idx, trajectories, strict=True):
                    ordered[i] = trajectory
            return ordered  # type: ignore[return-value]

        return self.loop.run_until_complete(run_all())

    def oracle_episodes(self, tasks: list[dict[str, Any]], snippet_only_fraction: float = 0.0, seed: int = 0) -> list[Any]:
        """The scripted oracle's episodes (assistant turns and observations as text) for ``tasks``.

        A seeded ``snippet_only_fraction`` of them come from the oracle that never browses and answers
        from search snippets (or says it cannot find the answer): demonstrations of a hasty researcher.
        """
        from deepresearcher.agent.oracle import OracleResearcher
        from deepresearcher.world import Task

        rng = random.Random(seed)
        browses = [rng.random() >= snippet_only_fraction for _ in tasks]

        async def run_all() -> list[Any]:
            return list(await asyncio.gather(*(
                OracleResearcher(self.toolbox(t), use_browse=browse, terse=self.compact_prompt)
                .run(Task.from_dict({k: v for k, v in t.items() if k != "world"}))
                for t, browse in zip(tasks, browses, strict=True)
            )))

        return self.loop.run_until_complete(run_all())

    def replay(self, tasks: list[dict[str, Any]], episodes: list[Any], tokenizer: Any) -> list[Trajectory]:
        """Oracle episodes replayed through the rollout engine as token-level trajectories (SFT data).

        The engine tokenizes each oracle turn as if sampled and appends the real tools' observations,
        so SFT data has exactly the layout RL rollouts have.
        """
        from deepresearcher.agent.loop import run_rollouts
        from deepresearcher.generate.scripted import ScriptedGenerator

        template = make_template(tokenizer, self.compact_prompt)
        # The oracle's turns are data, not samples: neither the turn limit nor the per-turn token cap may cut them.
        agent = self.config.agent.model_copy(update={"max_turns": max(self.config.agent.max_turns, 32),
                                                     "max_tokens_per_turn": self.config.agent.context_budget})

        async def one(task: dict[str, Any], episode: Any) -> Trajectory:
            generator = ScriptedGenerator(tokenizer, [_strip_think(turn.assistant) for turn in episode.turns])
            (trajectory,) = await run_rollouts([task], generator, self.toolbox(task), tokenizer, agent, template=template)
            return trajectory

        async def run_all() -> list[Trajectory]:
            return list(await asyncio.gather(*(one(t, e) for t, e in zip(tasks, episodes, strict=True))))

        return self.loop.run_until_complete(run_all())

    def close(self) -> None:
        for env in self.envs:
            self.loop.run_until_complete(env.aclose())
        self.loop.close()


def _strip_think(text: str) -> str:
    """The engine's prompt already ends with ``<think>``, so a turn's text starts right after it."""
    return text[len(THINK_OPEN) :] if text.startswith(THINK_OPEN) else text
