"""The training stages as functions of a config: ``run_sft(config)`` and ``run_grpo(config)``.

They own the wiring every entry point needs (which checkpoint, which tasks, the rollouts against the
environment, the scorer), so ``deepresearcher sft``/``train``, the quickstart and ``bench train`` differ
only in what they print. A caller that already holds a :class:`WorldRollouts` (the quickstart runs
every stage on one) passes it in; otherwise one is opened and closed here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from deepresearcher.agent.trajectory import Trajectory
from deepresearcher.config import Config
from deepresearcher.errors import ConfigError
from deepresearcher.train.rollout import WorldRollouts, score_trajectory


def warm_start(config: Config) -> Path:
    """The checkpoint GRPO starts from: ``train.model``, else the run's own SFT model (the quickstart's)."""
    from deepresearcher.inference.loader import resolve_checkpoint

    if config.train.model is not None:
        return resolve_checkpoint(config.train.model, config.resolved_cache_dir())
    warm = config.train.runs_dir / config.train.run_name / "sft_model"
    if not (warm / "config.json").is_file():
        raise ConfigError(f"train.model is not set and {warm} does not exist; pass --model PATH (a checkpoint "
                          "directory), --model smollm2-135m, or run `deepresearcher quickstart` first.")
    return warm


@contextmanager
def _rollouts_for(config: Config, given: WorldRollouts | None) -> Iterator[WorldRollouts]:
    if given is not None:
        yield given
        return
    from deepresearcher.train.tasks import task_sets

    rollouts = WorldRollouts(config, seed=config.train.seed, world_dirs=task_sets(config).world_dirs)
    try:
        yield rollouts
    finally:
        rollouts.close()


def sft_demonstrations(config: Config, rollouts: WorldRollouts, tasks: list[dict[str, Any]], tokenizer: Any,
                       episodes: list[Any] | None = None) -> list[Trajectory]:
    """The scripted oracle's episodes on ``tasks`` as token-level trajectories of the policy's template.

    ``episodes``: the oracle's episodes if already run (the quickstart trains its tokenizer on them first).
    """
    sft = config.train.sft
    if episodes is None:
        episodes = rollouts.oracle_episodes(tasks, sft.snippet_only_fraction, sft.seed)
    return rollouts.replay(tasks, episodes, tokenizer)


def run_sft(
    config: Config, *, out: Path | None = None, rollouts: WorldRollouts | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> Any:
    """SFT of ``train.model`` on the oracle's demonstrations of the run's SFT tasks; saved to ``out``
    (default ``runs/<run_name>/sft_model``). Returns the ``SFTResult``."""
    from transformers import AutoTokenizer

    from deepresearcher.inference.loader import resolve_checkpoint
    from deepresearcher.train.sft import train_sft
    from deepresearcher.train.tasks import task_sets

    if config.train.model is None:
        raise ConfigError("sft needs a model to start from: pass --model PATH or smollm2-135m (the quickstart makes one).")
    policy = resolve_checkpoint(config.train.model, config.resolved_cache_dir())
    out = out or config.train.runs_dir / config.train.run_name / "sft_model"
    tokenizer = AutoTokenizer.from_pretrained(str(policy))
    with _rollouts_for(config, rollouts) as active:
        data = sft_demonstrations(config, active, task_sets(config).sft, tokenizer)
    return train_sft(policy, data, config.train.sft, out, on_step=on_step)


def run_grpo(
    config: Config, *, model: str | Path | None = None, rollouts: WorldRollouts | None = None,
    tasks: list[dict[str, Any]] | None = None, resume: bool = False, show_progress: bool = True,
) -> Any:
    """GRPO from ``model`` (default :func:`warm_start`) on ``tasks`` (default the run's GRPO prompts),
    rewarded by the one scorer; returns the ``TrainResult``."""
    from deepresearcher.train.grpo import train_grpo
    from deepresearcher.train.tasks import task_sets

    start = Path(model) if model is not None else warm_start(config)
    prompts = tasks if tasks is not None else task_sets(config).grpo
    with _rollouts_for(config, rollouts) as active:
        return train_grpo(config, start, prompts, active.collect, lambda t, task: score_trajectory(t, task, config),
                          resume=resume, show_progress=show_progress)
