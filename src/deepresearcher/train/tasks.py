"""Which tasks a training run uses, from one world or from several that share names but not facts.

``quickstart``, ``sft`` and ``train`` all draw their tasks here, so the SFT tasks, the GRPO prompts and
the held-out tasks never overlap and are the same whichever command runs a stage.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepresearcher.config import Config


def held_out_seed(config: Config) -> int:
    """The seed of the held-out world of ``train.eval_world``: the dev world right after the training
    worlds, the test world after it. Recipes are chosen on dev; the reported figures come from test."""
    return config.world.seed + config.train.num_worlds + (config.train.eval_world == "test")


def ensure_training_worlds(config: Config) -> tuple[list[Path], Path | None]:
    """The training worlds' directories and the held-out world's (None with ``train.num_worlds`` 1).

    With several worlds, world i has seed ``world.seed + i`` and every world (the held-out one,
    ``held_out_seed``, included) draws names from one pool, so only copying generalizes.
    """
    from deepresearcher.web.local_world import ensure_world

    n = config.train.num_worlds
    if n == 1:
        return [ensure_world(config)], None
    names_seed = config.world.names_seed if config.world.names_seed is not None else config.world.seed
    dirs = [
        ensure_world(config.model_copy(update={"world": config.world.model_copy(
            update={"seed": seed, "names_seed": names_seed, "dir": None})}))
        for seed in [*range(config.world.seed, config.world.seed + n), held_out_seed(config)]
    ]
    return dirs[:n], dirs[n]


@dataclass
class TaskSets:
    """The tasks of one run; each task dict carries ``world``, the index of its world in ``world_dirs``."""

    world_dirs: list[Path]  # the training worlds, then the held-out world when there is one
    held_out_dir: Path | None
    sft: list[dict[str, Any]]  # oracle trajectories for the warm start
    grpo: list[dict[str, Any]]  # RL prompts: train-split tasks not used for SFT
    test: list[dict[str, Any]]  # held-out evaluation, at most ``train.eval_tasks``


def task_sets(config: Config) -> TaskSets:
    """Shuffle (seeded by ``train.seed``) and split the configured worlds' tasks.

    One world: SFT and GRPO tasks come from its ``train.split`` split and the test tasks from its
    ``train.eval_world`` split (dev or test). Several worlds: SFT and GRPO come from the training worlds'
    ``train.split`` splits and the test tasks from every split of the held-out (dev or test) world, whose
    facts the model never saw.
    """
    from deepresearcher.train.rollout import task_dict
    from deepresearcher.world import load_tasks

    cfg = config.train
    train_dirs, held_out = ensure_training_worlds(config)
    train = [{**task_dict(t), "world": w} for w, d in enumerate(train_dirs) for t in load_tasks(d, cfg.split)]
    if held_out is None:
        test = [{**task_dict(t), "world": 0} for t in load_tasks(train_dirs[0], cfg.eval_world)]
    else:
        test = [{**task_dict(t), "world": len(train_dirs)} for split in ("train", "dev", "test")
                for t in load_tasks(held_out, split)]
    random.Random(cfg.seed).shuffle(train)
    random.Random(cfg.seed + 1).shuffle(test)
    sft, grpo = train[: cfg.sft.num_tasks], train[cfg.sft.num_tasks :] or train
    dirs = train_dirs if held_out is None else [*train_dirs, held_out]
    return TaskSets(dirs, held_out, sft, grpo, test[: cfg.eval_tasks])
