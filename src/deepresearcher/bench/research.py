"""``research`` on a fresh install: does the default policy search before it answers, and answer right?

Runs what ``deepresearcher research "question"`` runs with no config and no quickstart agent (the embedded
SmolLM2-135M-Instruct, guided by ``agent.guide: auto``, greedy, on the default world) on held-out questions of
one task type from the world's test split, all episodes at once, and reports the fraction of episodes that
called ``web_search`` before answering, exact match and F1 of the answers, and each episode's steps.

    deepresearcher bench research --json [--tasks 20] [--type hop1] [--split test] [--skip 0] [--set agent.guide=off]

``--skip`` starts further into the split (a check on other questions than the reported ones).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from deepresearcher.agent.trajectory import Trajectory


def searched_first(trajectory: Trajectory) -> bool:
    """Whether a ``web_search`` ran before the episode's answer (or its end, when it did not answer)."""
    for turn in trajectory.turns:
        if turn.tool_call is not None and turn.tool_call.name == "web_search" and not turn.tool_call.error:
            return True
    return False


def _episode(trajectory: Trajectory) -> dict[str, Any]:
    from deepresearcher.reward.metrics import exact_match, f1_score

    steps = [f"{t.tool_call.name}: {t.tool_call.arguments}" if t.tool_call else (t.format_error or "answer")
             for t in trajectory.turns]
    return {"task_id": trajectory.task_id, "question": trajectory.question, "golds": trajectory.golds,
            "answer": trajectory.answer, "em": exact_match(trajectory.answer or "", trajectory.golds),
            "f1": round(f1_score(trajectory.answer or "", trajectory.golds), 3),
            "searched_first": searched_first(trajectory), "termination": trajectory.termination, "steps": steps}


async def _run(config: Any, tasks: list[Any]) -> list[Trajectory]:
    from deepresearcher.agent.loop import RolloutTask
    from deepresearcher.agent.session import open_session

    async with open_session(config, decoding="eval") as session:
        return await session.run([RolloutTask(task_id=t.id, question=t.question, golds=t.golds) for t in tasks])


def run(tasks: int = 20, task_type: str = "hop1", split: str = "test", skip: int = 0,
        overrides: list[str] | None = None) -> dict[str, Any]:
    """``tasks`` questions of ``task_type`` from the default world's ``split`` (after ``skip``), researched as a
    fresh install's ``research`` would; returns the fractions and every episode."""
    from deepresearcher.config import load_config
    from deepresearcher.web.local_world import ensure_world
    from deepresearcher.world import load_tasks

    config = load_config(None, overrides or [])
    chosen = [t for t in load_tasks(ensure_world(config), split) if t.type == task_type][skip: skip + tasks]
    started = time.perf_counter()
    trajectories = asyncio.run(_run(config, chosen))
    seconds = time.perf_counter() - started
    episodes = [_episode(t) for t in trajectories]
    n = max(1, len(episodes))
    return {
        "bench": "research", "policy": config.agent.policy, "guide": config.agent.guide,
        "guided": bool(trajectories and trajectories[0].metadata.get("guided")),
        "world": {"seed": config.world.seed, "size": config.world.size, "split": split, "type": task_type,
                  "skip": skip},
        "episodes": len(episodes),
        "searched_before_answering": round(sum(e["searched_first"] for e in episodes) / n, 3),
        "exact_match": round(sum(e["em"] for e in episodes) / n, 3),
        "f1": round(sum(e["f1"] for e in episodes) / n, 3),
        "seconds": round(seconds, 1),
        "runs": episodes,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="deepresearcher bench research", description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=20, help="questions researched (all at once)")
    parser.add_argument("--type", default="hop1", help="task type: hop1, hop2, hop3, comparison, two_page, ...")
    parser.add_argument("--split", default="test", choices=["train", "dev", "test"])
    parser.add_argument("--skip", type=int, default=0, help="questions of the type to skip first")
    parser.add_argument("--set", action="append", default=[], dest="overrides", metavar="KEY=VALUE",
                        help="a config override, as `--set` of every command (e.g. agent.guide=off)")
    args = parser.parse_args(argv)
    return run(args.tasks, args.type, args.split, args.skip, args.overrides)


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(main(sys.argv[1:]), indent=2))
