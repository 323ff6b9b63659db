"""Options and helpers shared by CLI commands."""

from __future__ import annotations

from pathlib import Path

import typer

from deepresearcher.config import Config, load_config

ConfigOption = typer.Option(None, "--config", "-c", help="YAML config file, or a shipped recipe by name: quickstart, "
                            "smollm2-135m-world, paper-qwen2.5-7b (see configs/).")
SetOption = typer.Option(None, "--set", help="Override a config field: --set search.top_k=5 (repeatable).")


def resolve_config(config: Path | None, overrides: list[str] | None) -> Config:
    """Load the config file (or defaults) with the command line's --set overrides."""
    return load_config(config, overrides or [])
