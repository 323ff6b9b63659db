"""GRPO as a function of a config: ``run_grpo(config)`` (its warm start's twin is ``warmstart.pipeline.run_sft``).

It owns the wiring every entry point needs (which checkpoint, which tasks, the rollouts against the
environment, the scorer), so ``deepresearcher train``, the quickstart and ``bench train`` differ
only in what they print. A caller that already holds a :class:`Rollouts` (the quickstart runs
every stage on one) passes it in; otherwise one is opened and closed here (``rollouts_for``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from deepresearcher.agent.trajectory import Trajectory
from deepresearcher.config import Config
from deepresearcher.errors import ConfigError
from deepresearcher.train.rollout import Rollouts, score_trajectories
from deepresearcher.train.tasks import TaskSets, task_sets


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
def rollouts_for(config: Config, given: Rollouts | None, sets: TaskSets | None = None) -> Iterator[Rollouts]:
    """``given``, else a :class:`Rollouts` over the environments of ``sets`` (default the run's), closed on exit."""
    if given is not None:
        yield given
        return
    environments = (sets or task_sets(config)).environments
    rollouts = Rollouts(config, seed=config.train.seed, world_dirs=environments)
    try:
        yield rollouts
    finally:
        rollouts.close()


def run_grpo(
    config: Config, *, model: str | Path | None = None, rollouts: Rollouts | None = None,
    tasks: list[dict[str, Any]] | None = None, resume: bool = False, show_progress: bool = True,
) -> Any:
    """GRPO from ``model`` (default :func:`warm_start`) on ``tasks`` (default the run's GRPO prompts),
    rewarded by the one scorer (under a judge reward, the run's judge: ``reward.reward_judge``); returns the
    ``TrainResult``.

    The run directory gets the prompts (``tasks.jsonl``: id, source, question, answers) and, when
    ``train.eval_data`` or ``train.eval_every`` is set, the held-out evaluation (``train.eval_data``, by default
    the world's held-out tasks when training on the world) of the live policy every ``train.eval_every`` steps
    (``heldout_*`` and ``heldout_behaviour/*`` in metrics.jsonl, ``eval_step_<n>.jsonl``) and of the final one
    (``eval_after_grpo.jsonl``, ``heldout.json`` and ``heldout_behaviours.json`` by source); the quickstart, which passes its own ``rollouts``, evaluates itself.
    """
    from deepresearcher.eval.behaviours import flat_rates
    from deepresearcher.train.async_grpo import train_async_grpo
    from deepresearcher.train.grpo import train_grpo
    from deepresearcher.train.heldout import evaluate, evaluate_model
    from deepresearcher.train.run_dir import RunDir

    from deepresearcher.reward import JUDGE_METRICS, reward_judge

    if config.reward.metric in JUDGE_METRICS:  # the scorer's judge, recording its verdicts in the run's cache
        reward_judge(config)
    start = Path(model) if model is not None else warm_start(config)
    sets: TaskSets | None = None
    if tasks is None or rollouts is None:  # the run's own tasks, or the environments to open for the given ones
        sets = task_sets(config)
    prompts = tasks if tasks is not None else sets.grpo if sets is not None else []
    wants_held_out = config.train.eval_data is not None or config.train.eval_every > 0
    held_out = sets.test if rollouts is None and wants_held_out and sets is not None else []
    run = RunDir(config.train.runs_dir / config.train.run_name)
    run.write_jsonl("tasks.jsonl", ({k: t[k] for k in ("id", "source", "type", "question", "golds") if k in t}
                                    for t in prompts))
    with rollouts_for(config, rollouts, sets) as active:

        def evaluate_live(policy: Any, tokenizer: Any, step: int, *, vllm_llm: Any = None) -> dict[str, float]:
            # with the trainer's colocated vLLM (train.use_vllm) the held-out turns decode there, as the rollouts do
            result = evaluate_model(policy, tokenizer, held_out, active, config, vllm_llm=vllm_llm)
            run.write_jsonl(f"eval_step_{step:05d}.jsonl", result.rows)
            return {**{f"heldout_{k}": float(v) for k, v in result.by_type()["all"].items() if k != "n"},
                    **flat_rates(result.behaviours_by_type()["all"], prefix="heldout_behaviour/")}

        def scorer(trajectories: list[Trajectory], batch: list[dict[str, Any]]) -> list[dict[str, float]]:
            return score_trajectories(trajectories, batch, config)

        live = evaluate_live if held_out else None
        if config.train.async_grpo.enabled:
            result = train_async_grpo(config, start, prompts, active, scorer, resume=resume,
                                      show_progress=show_progress, held_out=live)
        else:
            result = train_grpo(config, start, prompts, active.collect, scorer, resume=resume,
                                show_progress=show_progress, held_out=live)
        if held_out:
            final = evaluate(result.model_dir, held_out, active, config)
            run.write_jsonl("eval_after_grpo.jsonl", final.rows)
            run.write_json("heldout.json", final.by_type())
            run.write_json("heldout_behaviours.json", final.behaviours_by_type())
    return result
