"""Options and helpers shared by CLI commands."""

from __future__ import annotations

from pathlib import Path

import typer

from deepresearcher.config import Config, load_config

ConfigOption = typer.Option(None, "--config", "-c", help="YAML config file, or a shipped recipe by name: quickstart, "
                            "smollm2-135m-world, paper-qwen2.5-7b (see configs/).")
SetOption = typer.Option(None, "--set", help="Override a config field: --set search.top_k=5 (repeatable).")


def resolve_config(config: Path | None, overrides: list[str] | None) -> Config:
    """Load the config file (or defaults) with the command line's --set overrides, and set the process's
    device choice from it (``runtime.device``), so every model the command loads goes there."""
    from deepresearcher.inference import device

    loaded = load_config(config, overrides or [])
    device.configure(loaded.runtime.device)
    return loaded


def run_config_of(policy: str) -> Path | None:
    """The config of the run that trained ``policy``, when it is a model directory a run wrote (``runs/X/model``,
    ``runs/X/sft_model``): ``runs/X/config.yaml``. A model trained with a one-line system turn, eight turns and
    two search hits answers well only when it is served the way it was trained; the defaults are not that way."""
    model = Path(policy)
    config = model.parent / "config.yaml"
    return config if (model / "config.json").is_file() and config.is_file() else None


def config_for_policy(config: Path | None, policy: str | None) -> Path | None:
    """``--config`` as given; without one, the config of the run that trained ``--policy`` (:func:`run_config_of`),
    said on stderr (stdout may be a command's machine output)."""
    if config is not None or policy is None or (trained := run_config_of(policy)) is None:
        return config
    typer.echo(f"config: {trained} (the run that trained {policy}: its prompt, tools and limits); pass --config "
               "for another", err=True)
    return trained
