"""``deepresearcher train``, ``sft`` and ``quickstart``: the training entry points.

| command     | runs                                  | config section            |
|-------------|---------------------------------------|---------------------------|
| quickstart  | world, tokenizer, tiny model, SFT, GRPO, eval, report | ``train`` (+ world, search, browse, agent) |
| sft         | oracle trajectories, SFT warm start   | ``train.sft``             |
| train       | GRPO against the configured environment | ``train``               |
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import typer
from rich.console import Console

from deepresearcher.cli.common import ConfigOption, SetOption, resolve_config

console = Console()
ModelOption = typer.Option(None, "--model", help="Policy: a HF checkpoint dir or `smollm2-135m` (overrides train.model).")


def _load(config: Path | None, overrides: list[str] | None, model: str | None):  # noqa: ANN202
    cfg = resolve_config(config, overrides)
    if model is not None:
        cfg.train.model = model
    return cfg


def _quiet_libraries() -> None:
    """Our own progress bars and tables are the output: drop TRL's experimental notices, the deprecation
    notices transformers raises inside TRL's calls, and its "Loading weights" / "Writing model shards" bars."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")  # renames inside TRL's calls
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def register(app: typer.Typer) -> None:
    app.command("train", epilog="Example: deepresearcher train --config configs/smollm2-135m-world.yaml")(train)
    app.command("sft", epilog="Example: deepresearcher sft --config configs/quickstart.yaml --model runs/quickstart/base_model")(sft)
    app.command("quickstart", epilog="Example: deepresearcher quickstart --set train.max_steps=10")(quickstart)


def train(
    config: Path = ConfigOption,
    overrides: list[str] = SetOption,
    model: str = ModelOption,
    resume: bool = typer.Option(False, "--resume", help="Continue the run from its latest checkpoint (same data order)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the resolved plan and check it; train nothing."),
) -> None:
    """GRPO: rollouts against the environment, outcome reward, tool output masked out of the loss.

    Without --model and train.model, it continues from runs/<run_name>/sft_model (the quickstart's SFT).
    """
    from deepresearcher.errors import ConfigError
    from deepresearcher.train.grpo import plan

    cfg = _load(config, overrides, model)
    console.print_json(json.dumps(plan(cfg)))
    if dry_run:
        return
    if cfg.train.model is None:
        warm = cfg.train.runs_dir / cfg.train.run_name / "sft_model"
        if not (warm / "config.json").is_file():
            raise ConfigError(f"train.model is not set and {warm} does not exist; pass --model PATH (a checkpoint "
                              "directory), --model smollm2-135m, or run `deepresearcher quickstart` first.")
        cfg.train.model = str(warm)
    _quiet_libraries()
    from deepresearcher.train.grpo import train_grpo
    from deepresearcher.train.models import resolve_policy
    from deepresearcher.train.rollout import WorldRollouts, score_trajectory
    from deepresearcher.train.tasks import task_sets

    policy = resolve_policy(cfg.train.model, cfg.resolved_cache_dir())
    sets = task_sets(cfg)
    rollouts = WorldRollouts(cfg, seed=cfg.train.seed, world_dirs=sets.world_dirs)
    try:
        result = train_grpo(cfg, policy, sets.grpo, rollouts.collect, lambda t, task: score_trajectory(t, task, cfg),
                            resume=resume)
    finally:
        rollouts.close()
    from deepresearcher.train.report import write_report
    from deepresearcher.train.run_dir import RunDir

    report = write_report(RunDir(result.run_dir), title=f"GRPO run {cfg.train.run_name}")
    console.print(f"Trained {result.steps} steps in {result.seconds:.0f}s; model in {result.model_dir}; report {report}")


def sft(
    config: Path = ConfigOption,
    overrides: list[str] = SetOption,
    model: str = ModelOption,
    out: Path = typer.Option(None, "--out", help="Where to save the fine-tuned model; default runs/<name>/sft_model."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would run; train nothing."),
) -> None:
    """SFT warm start on the scripted oracle's trajectories in the synthetic world."""
    from deepresearcher.errors import ConfigError

    cfg = _load(config, overrides, model)
    out = out or cfg.train.runs_dir / cfg.train.run_name / "sft_model"
    console.print_json(json.dumps({"model": cfg.train.model, "out": str(out), **cfg.train.sft.model_dump(mode="json")}))
    if dry_run:
        return
    if cfg.train.model is None:
        raise ConfigError("sft needs a model to start from: pass --model PATH or smollm2-135m (the quickstart makes one).")
    _quiet_libraries()
    from transformers import AutoTokenizer

    from deepresearcher.train.models import resolve_policy
    from deepresearcher.train.rollout import WorldRollouts
    from deepresearcher.train.sft import train_sft
    from deepresearcher.train.tasks import task_sets

    policy = resolve_policy(cfg.train.model, cfg.resolved_cache_dir())
    sets = task_sets(cfg)
    rollouts = WorldRollouts(cfg, seed=cfg.train.seed, world_dirs=sets.world_dirs)
    try:
        episodes = rollouts.oracle_episodes(sets.sft, cfg.train.sft.snippet_only_fraction, cfg.train.sft.seed)
        data = rollouts.replay(sets.sft, episodes, AutoTokenizer.from_pretrained(str(policy)))
    finally:
        rollouts.close()
    result = train_sft(policy, data, cfg.train.sft, out)
    console.print(f"SFT: {result.steps} steps, loss {result.final_loss:.3f}, {result.tokens_per_second:.0f} tokens/s -> {out}")


def quickstart(
    config: Path = ConfigOption,
    overrides: list[str] = SetOption,
    model: str = ModelOption,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the resolved plan and check it; train nothing."),
) -> None:
    """Build the synthetic web, make a tiny model, SFT it, GRPO it, and report before/after on held-out tasks."""
    from deepresearcher.config import RECIPES_DIR
    from deepresearcher.train.grpo import plan

    cfg = resolve_config(config or RECIPES_DIR / "quickstart.yaml", overrides)  # the shipped recipe, from any folder
    console.print_json(json.dumps(plan(cfg, model)))
    if dry_run:
        return
    _quiet_libraries()
    from deepresearcher.train.models import resolve_policy
    from deepresearcher.train.quickstart import run_quickstart

    policy = str(resolve_policy(model, cfg.resolved_cache_dir())) if model else None
    summary = run_quickstart(cfg, model=policy, say=lambda text: console.print(text, markup=False, highlight=False))
    console.print_json(json.dumps(summary))
