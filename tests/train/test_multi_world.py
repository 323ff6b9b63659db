"""Training on several shared-name worlds: each task's tool calls reach its own world's facts."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepresearcher.config import load_config
from deepresearcher.reward import answer_metrics
from deepresearcher.train.quickstart import ensure_training_worlds
from deepresearcher.train.rollout import WorldRollouts, task_dict
from deepresearcher.world import load_tasks


@pytest.mark.timeout(120)
def test_same_question_gets_each_worlds_own_answer(tmp_path: Path) -> None:
    """Worlds sharing names ask identical questions with different answers; the oracle, routed by
    ``task["world"]``, answers each from its own world (routing to one world would fail the other)."""
    config = load_config(None, [f"cache_dir={tmp_path / 'cache'}", "world.size=tiny", "train.num_worlds=2",
                                "search.top_k=2", "browse.top_passages=1", "browse.observation_format=compact"])
    train_dirs, held_out = ensure_training_worlds(config)
    assert len(train_dirs) == 2 and held_out is not None and held_out not in train_dirs
    by_question = [{t.question: {**task_dict(t), "world": w} for t in load_tasks(d, "train")}
                   for w, d in enumerate(train_dirs)]
    pairs = [(a, by_question[1][q]) for q, a in by_question[0].items()
             if q in by_question[1] and a["answerable"] and set(a["answers"]) != set(by_question[1][q]["answers"])]
    assert len(pairs) >= 3, "shared-name worlds should ask the same questions with different answers"
    tasks = [t for pair in pairs[:6] for t in pair]
    rollouts = WorldRollouts(config, world_dirs=[*train_dirs, held_out])
    try:
        episodes = rollouts.oracle_episodes(tasks)
    finally:
        rollouts.close()
    f1 = [answer_metrics(e.answer, t["answers"])["f1"] for e, t in zip(episodes, tasks, strict=True)]
    assert sum(f1) / len(f1) >= 0.8
