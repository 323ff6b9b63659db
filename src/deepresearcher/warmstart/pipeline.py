"""The warm start as a function of a config: ``run_sft(config)``, and the demonstrations and drills it trains on.

It owns the wiring ``deepresearcher sft``, the quickstart and the benchmarks share (which checkpoint, which
demonstrations: the oracle's episodes on the world's SFT tasks or saved trajectories, the check drills);
GRPO's twin is ``train.pipeline.run_grpo``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from deepresearcher.agent.trajectory import Trajectory
from deepresearcher.config import Config
from deepresearcher.errors import ConfigError
from deepresearcher.train.pipeline import rollouts_for
from deepresearcher.train.rollout import Rollouts
from deepresearcher.train.tasks import mix_by_ratio, task_sets


def sft_demonstrations(config: Config, rollouts: Rollouts, tasks: list[dict[str, Any]], tokenizer: Any,
                       episodes: list[Any] | None = None) -> list[Trajectory]:
    """The scripted oracle's episodes on ``tasks`` as token-level trajectories of the policy's template.

    ``episodes``: the oracle's episodes if already run (the quickstart trains its tokenizer on them first).
    """
    sft = config.train.sft
    if episodes is None:
        episodes = rollouts.oracle_episodes(tasks, sft.snippet_only_fraction, sft.seed)
    return rollouts.replay(tasks, episodes, tokenizer)


def sft_drills(config: Config, tokenizer: Any) -> list[tuple[list[int], list[float]]] | None:
    """The check drills of ``train.sft.check_drills`` (``warmstart/drills.py``) for every SFT step, their values from
    the training worlds' facts, as rows of this tokenizer's template; None when drills are off."""
    from deepresearcher.agent.session import make_template
    from deepresearcher.train.tasks import ensure_training_worlds
    from deepresearcher.warmstart.drills import check_drills, drill_rows

    sft = config.train.sft
    if not sft.check_drills:
        return None
    sources = sft.data if sft.data is not None else config.train.data
    if not any(source.kind == "world" for source in sources):
        raise ConfigError("train.sft.check_drills draws its values from a synthetic world's facts, and no SFT source "
                          "is a world; set train.sft.check_drills=0.")
    world_dirs, _ = ensure_training_worlds(config)
    drills = check_drills(world_dirs, sft.check_drills * sft.steps, sft.seed)
    return drill_rows(drills, make_template(tokenizer, config), terse=config.train.compact_prompt)


def sft_data(config: Config, tokenizer: Any) -> list[Trajectory]:
    """Every demonstration of the SFT sources (``train.sft.data``, else ``train.data``) in the policy's template:
    the oracle's on the world's SFT tasks, saved trajectories (those scoring ``train.sft.min_f1``) replayed from
    their records, mixed at the ratios."""
    from deepresearcher.warmstart.demonstrations import (
        demonstration_sources,
        good_enough,
        load_demonstrations,
        replay_demonstrations,
    )

    sources = demonstration_sources(config)
    pools: list[list[Trajectory]] = []
    for source in sources:
        if source.kind == "world":
            world = config.model_copy(update={"train": config.train.model_copy(update={"data": [source], "eval_data": None})})
            sets = task_sets(world)
            with rollouts_for(world, None, sets) as active:
                pools.append(sft_demonstrations(world, active, sets.sft, tokenizer))
        else:
            assert source.path is not None  # demonstration_sources checked it
            demos = good_enough(load_demonstrations(source.path, source.limit), config.train.sft.min_f1, config.reward)
            pools.append(replay_demonstrations(config, demos, tokenizer))
    return mix_by_ratio(pools, [s.ratio for s in sources], config.train.sft.seed)


def run_sft(
    config: Config, *, out: Path | None = None, on_step: Callable[[int, float], None] | None = None,
) -> Any:
    """SFT of ``train.model`` on the demonstrations of :func:`sft_data`; saved to ``out`` (default
    ``runs/<run_name>/sft_model``). Returns the ``SFTResult``."""
    from transformers import AutoTokenizer

    from deepresearcher.inference.loader import resolve_checkpoint
    from deepresearcher.warmstart.sft import train_sft

    if config.train.model is None:
        raise ConfigError("sft needs a model to start from: pass --model PATH or smollm2-135m (the quickstart makes one).")
    policy = resolve_checkpoint(config.train.model, config.resolved_cache_dir())
    out = out or config.train.runs_dir / config.train.run_name / "sft_model"
    tokenizer = AutoTokenizer.from_pretrained(str(policy))
    return train_sft(policy, sft_data(config, tokenizer), config.train.sft, out, bf16=config.train.bf16, on_step=on_step,
                     drills=sft_drills(config, tokenizer))
