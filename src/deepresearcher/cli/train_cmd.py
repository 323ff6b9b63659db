"""``deepresearcher train``, ``sft`` and ``quickstart``: the training entry points.

| command     | runs                                  | config section            |
|-------------|---------------------------------------|---------------------------|
| quickstart  | world, tokenizer, tiny model, SFT, GRPO, eval, report | ``train`` (+ world, search, browse, agent) |
| sft         | oracle or saved trajectories, SFT warm start | ``train.sft`` (``train.sft.data``) |
| train       | GRPO against each source's environment | ``train`` (``train.data``, ``train.eval_data``) |
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import typer
from rich.console import Console

from deepresearcher.cli.common import ConfigOption, SetOption, resolve_config
from deepresearcher.config import DataSource

console = Console()
ModelOption = typer.Option(None, "--model", help="Policy: a HF checkpoint dir or `smollm2-135m` (overrides train.model).")
DATA_HELP = ("SPEC[=RATIO], repeatable; replaces {field}. SPEC: `world[:split]`, a benchmark `name[:split]` "
             "(nq, tq, hotpotqa, 2wiki, ...), or a file (verl parquet, `data mix` output, JSONL of {{question, golds}}"
             "{extra}). Example: --data nq:train=1 --data hotpotqa:train=3.")
DataOption = typer.Option(None, "--data", help=DATA_HELP.format(field="train.data", extra=", saved trajectories"))
EvalDataOption = typer.Option(None, "--eval-data", help=DATA_HELP.format(field="train.eval_data", extra=""))
SFTDataOption = typer.Option(None, "--data", help=DATA_HELP.format(
    field="train.sft.data", extra=", saved trajectories: the demonstrations real questions need"))


def _load(config: Path | None, overrides: list[str] | None, model: str | None):  # noqa: ANN202
    cfg = resolve_config(config, overrides)
    if model is not None:
        cfg.train.model = model
    return cfg


def _sources(specs: list[str]) -> list[DataSource]:
    return [DataSource.parse(spec) for spec in specs]


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
    data: list[str] = DataOption,
    eval_data: list[str] = EvalDataOption,
    resume: bool = typer.Option(False, "--resume", help="Continue the run from its latest checkpoint (same data order)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the resolved plan and check it; train nothing."),
    engine: str = typer.Option("trl", "--engine", help="trl: this machine (TRL). verl: verl on Ray, one node or a "
                               "cluster (needs the verl extra; settings in train.verl, see docs/verl.md)."),
) -> None:
    """GRPO: rollouts against the environment, outcome reward, tool output masked out of the loss.

    The questions come from train.data (default: the synthetic world); each source is researched in its
    environment (a world's own index, or the search backend for real questions). Without --model and
    train.model, it continues from runs/<run_name>/sft_model (the quickstart's SFT).
    """
    from deepresearcher.train.grpo import plan

    cfg = _load(config, overrides, model)
    if data:
        cfg.train.data = _sources(data)
    if eval_data:
        cfg.train.eval_data = _sources(eval_data)
    if engine not in ("trl", "verl"):
        raise ConfigError(f"--engine {engine!r} is not one of: trl, verl.")
    if engine == "verl":
        _train_verl(cfg, dry_run, resume)
        return
    console.print_json(json.dumps(plan(cfg)))
    if dry_run:
        return
    _quiet_libraries()
    from deepresearcher.train.pipeline import run_grpo
    from deepresearcher.train.report import heldout_tables, write_report
    from deepresearcher.train.run_dir import RunDir

    result = run_grpo(cfg, resume=resume)
    run = RunDir(result.run_dir)
    report = write_report(run, title=f"GRPO run {cfg.train.run_name}", tables=heldout_tables(run))
    console.print(f"Trained {result.steps} steps in {result.seconds:.0f}s; model in {result.model_dir}; report {report}")


def _train_verl(cfg, dry_run: bool, resume: bool) -> None:  # noqa: ANN001
    """``train --engine verl``: write and validate verl's config, print the plan, then run verl's trainer.

    verl's workers may run on other nodes, so a local model directory is passed as an absolute path.
    """
    from deepresearcher.errors import ConfigError
    from deepresearcher.integrations.verl import launch

    if cfg.train.model is None:
        raise ConfigError("--engine verl needs a policy: pass --model PATH (a Hugging Face checkpoint directory "
                          "every node can read, or a hub id) or set train.model.")
    model = cfg.train.model
    if not dry_run and model == "smollm2-135m":
        from deepresearcher.inference.loader import resolve_checkpoint

        model = str(resolve_checkpoint(model, cfg.resolved_cache_dir()))
    if Path(model).exists():
        model = str(Path(model).resolve())
    prepared = launch.prepare(cfg, model, resume=resume)
    console.print_json(json.dumps(prepared.summary))
    if dry_run:
        return
    launch.run(prepared)
    console.print(f"verl run finished; checkpoints in {prepared.files.root / 'checkpoints'}")


def sft(
    config: Path = ConfigOption,
    overrides: list[str] = SetOption,
    model: str = ModelOption,
    out: Path = typer.Option(None, "--out", help="Where to save the fine-tuned model; default runs/<name>/sft_model."),
    data: list[str] = SFTDataOption,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would run; train nothing."),
) -> None:
    """SFT warm start on demonstrations: the scripted oracle's in the synthetic world (the default), or saved
    trajectories (`research --save`, eval's trajectories.jsonl) for real questions."""
    cfg = _load(config, overrides, model)
    if data:
        cfg.train.sft.data = _sources(data)
    from deepresearcher.warmstart.demonstrations import demonstration_sources

    demonstration_sources(cfg)  # refuses question-only sources before anything loads
    out = out or cfg.train.runs_dir / cfg.train.run_name / "sft_model"
    console.print_json(json.dumps({"model": cfg.train.model, "out": str(out), **cfg.train.sft.model_dump(mode="json")}))
    if dry_run:
        return
    _quiet_libraries()
    from deepresearcher.warmstart.pipeline import run_sft

    result = run_sft(cfg, out=out)
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
    from deepresearcher.quickstart.recipe import require_world_data

    require_world_data(cfg)
    console.print_json(json.dumps(plan(cfg, model)))
    if dry_run:
        return
    _quiet_libraries()
    from deepresearcher.inference.loader import resolve_checkpoint
    from deepresearcher.quickstart.recipe import run_quickstart

    policy = str(resolve_checkpoint(model, cfg.resolved_cache_dir())) if model else None
    summary = run_quickstart(cfg, model=policy, say=lambda text: console.print(text, markup=False, highlight=False))
    console.print_json(json.dumps(summary))
