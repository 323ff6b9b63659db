"""Training on several shared-name worlds: each task's tool calls reach its own world's facts."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepresearcher.config import load_config
from deepresearcher.reward import answer_metrics
from deepresearcher.train.rollout import Rollouts, task_dict
from deepresearcher.train.tasks import ensure_training_worlds
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
             if q in by_question[1] and a["answerable"] and set(a["golds"]) != set(by_question[1][q]["golds"])]
    assert len(pairs) >= 3, "shared-name worlds should ask the same questions with different answers"
    tasks = [t for pair in pairs[:6] for t in pair]
    rollouts = Rollouts(config, world_dirs=[*train_dirs, held_out])
    try:
        episodes = rollouts.oracle_episodes(tasks)
    finally:
        rollouts.close()
    f1 = [answer_metrics(e.answer, t["golds"])["f1"] for e, t in zip(episodes, tasks, strict=True)]
    assert sum(f1) / len(f1) >= 0.8


def test_task_sets_keep_sft_grpo_and_held_out_tasks_apart(tmp_path: Path) -> None:
    """SFT, GRPO and test tasks never overlap; test tasks come only from the held-out world; seeded order."""
    from deepresearcher.train.tasks import task_sets

    overrides = [f"cache_dir={tmp_path / 'cache'}", "world.size=tiny", "train.num_worlds=2",
                 "train.sft.num_tasks=20", "train.eval_tasks=15"]
    sets = task_sets(load_config(None, overrides))
    assert len(sets.world_dirs) == 3 and sets.held_out_dir == sets.world_dirs[2]
    assert len(sets.sft) == 20 and len(sets.test) == 15 and sets.grpo
    ids = [{(t["world"], t["id"]) for t in part} for part in (sets.sft, sets.grpo, sets.test)]
    assert not (ids[0] & ids[1]) and not (ids[0] & ids[2]) and not (ids[1] & ids[2])
    assert {t["world"] for t in sets.sft + sets.grpo} == {0, 1} and {t["world"] for t in sets.test} == {2}
    again = task_sets(load_config(None, overrides))
    assert [t["id"] for t in again.sft] == [t["id"] for t in sets.sft]
    other = task_sets(load_config(None, [*overrides, "train.seed=1"]))
    assert [t["id"] for t in other.sft] != [t["id"] for t in sets.sft]

    single = task_sets(load_config(None, [f"cache_dir={tmp_path / 'cache'}", "world.size=tiny", "train.eval_tasks=15"]))
    assert single.held_out_dir is None and {t["world"] for t in single.test} == {0}
    assert all(t["id"].split("-")[1] == "test" for t in single.test), single.test[0]["id"]


@pytest.mark.timeout(120)
def test_snippet_only_fraction_mixes_hasty_demonstrations(tmp_path: Path) -> None:
    """A seeded share of oracle episodes never opens a page; those score far below the browsing ones."""
    config = load_config(None, [f"cache_dir={tmp_path / 'cache'}", "world.size=tiny", "search.top_k=2",
                                "search.snippet_chars=40", "browse.observation_format=compact"])
    (world_dir,), _ = ensure_training_worlds(config)
    tasks = [{**task_dict(t), "world": 0} for t in load_tasks(world_dir, "train") if t.answerable][:24]
    rollouts = Rollouts(config, world_dirs=[world_dir])
    try:
        mixed = rollouts.oracle_episodes(tasks, snippet_only_fraction=0.5, seed=3)
        again = rollouts.oracle_episodes(tasks, snippet_only_fraction=0.5, seed=3)
        thorough = rollouts.oracle_episodes(tasks)
    finally:
        rollouts.close()

    def browses(episode) -> bool:
        return any('"browse_webpage"' in turn.assistant for turn in episode.turns)

    flags = [browses(e) for e in mixed]
    assert flags == [browses(e) for e in again], "the mix must be reproducible from its seed"
    assert 0 < sum(flags) < len(flags), "half the episodes should browse and half should not"
    assert all(browses(e) for e in thorough)
    f1 = [answer_metrics(e.answer, t["golds"])["f1"] for e, t in zip(mixed, tasks, strict=True)]
    hasty = [x for x, flag in zip(f1, flags, strict=True) if not flag]
    careful = [x for x, flag in zip(f1, flags, strict=True) if flag]
    assert sum(careful) / len(careful) > sum(hasty) / len(hasty) + 0.3


def test_recipes_are_chosen_on_a_dev_world_and_reported_on_a_test_world(tmp_path: Path) -> None:
    """train.eval_world: the held-out tasks come from a dev world or a separate test world (the
    default, for reported figures); training tasks are the same either way."""
    from deepresearcher.train.tasks import task_sets
    from deepresearcher.world import load_manifest

    base = [f"cache_dir={tmp_path / 'cache'}", "world.size=tiny", "world.seed=3", "train.num_worlds=2",
            "train.sft.num_tasks=20", "train.eval_tasks=15"]
    test = task_sets(load_config(None, base))
    dev = task_sets(load_config(None, [*base, "train.eval_world=dev"]))
    assert load_manifest(dev.held_out_dir)["seed"] == 5 and load_manifest(test.held_out_dir)["seed"] == 6
    assert dev.world_dirs[:2] == test.world_dirs[:2] and dev.held_out_dir not in test.world_dirs
    assert [t["id"] for t in dev.sft] == [t["id"] for t in test.sft]
    one = [f"cache_dir={tmp_path / 'cache'}", "world.size=tiny", "train.eval_tasks=15"]
    assert {t["id"].split("-")[1] for t in task_sets(load_config(None, one)).test} == {"test"}
    assert {t["id"].split("-")[1] for t in task_sets(load_config(None, [*one, "train.eval_world=dev"])).test} == {"dev"}
