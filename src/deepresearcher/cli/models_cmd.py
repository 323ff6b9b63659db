"""``deepresearcher models list``: which models are available offline and where they come from."""

from __future__ import annotations

import json

import typer


def register(app: typer.Typer) -> None:
    models = typer.Typer(help="Models available on this machine (reader, judge, embedder, tokenizers).",
                         no_args_is_help=True)
    app.add_typer(models, name="models")

    @models.command("list")
    def list_cmd(as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table.")) -> None:
        """List packaged models (with the install command of missing ones) and Hugging Face cache entries."""
        from rich.console import Console
        from rich.table import Table

        from deepresearcher.llm.catalog import list_local_models

        found = list_local_models()
        if as_json:
            typer.echo(json.dumps([m.as_dict() for m in found], indent=2))
            return
        table = Table("model", "kind", "source", "size")
        table.add_column("where / how to install", overflow="fold")
        for m in found:
            where = m.path if m.available else f"[yellow]missing:[/] {m.install}"
            table.add_row(m.name, m.kind, m.source, f"{m.size_bytes / 1e6:.1f} MB" if m.available else "-", where)
        Console().print(table)
