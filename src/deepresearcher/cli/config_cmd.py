"""``deepresearcher config show|docs``: the resolved config, and the generated field reference."""

from __future__ import annotations

from pathlib import Path

import typer

from deepresearcher.cli.common import ConfigOption, SetOption, resolve_config

config_app = typer.Typer(help="Show the resolved config or its reference.", no_args_is_help=True)


@config_app.command("show", epilog="Example: deepresearcher config show -c configs/quickstart.yaml --set search.top_k=5")
def show(config: Path = ConfigOption, overrides: list[str] = SetOption) -> None:
    """Print the resolved config (file + overrides + defaults) as YAML, with its hash."""
    from deepresearcher.config import dump_config

    resolved = resolve_config(config, overrides)
    typer.echo(f"# config hash: {resolved.config_hash()}")
    typer.echo(dump_config(resolved), nl=False)


@config_app.command("docs")
def docs() -> None:
    """Print the Markdown reference of every config field (docs/config.md)."""
    from deepresearcher.config_docs import config_reference

    typer.echo(config_reference(), nl=False)


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")
