"""``deepresearcher cache stats|export|import|prune``: inspect and maintain the record/replay cache.

examples:
    deepresearcher cache stats --json
    deepresearcher cache export recording.jsonl --kind search
    deepresearcher cache import recording.jsonl --set cache.path=/data/web-cache.sqlite
    deepresearcher cache prune --older-than-days 90
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from deepresearcher.cli.common import ConfigOption, SetOption, resolve_config
from deepresearcher.errors import ConfigError

if TYPE_CHECKING:
    from deepresearcher.web.cache import WebCache

console = Console()


def _open(config: Path | None, overrides: list[str] | None, *, must_exist: bool) -> WebCache:
    """The configured cache file, opened for maintenance (readwrite, whatever the run mode is)."""
    from deepresearcher.web.cache import WebCache

    cfg = resolve_config(config, overrides)
    path = WebCache.config_path(cfg.cache, cfg.resolved_cache_dir())
    if must_exist and not path.is_file():
        raise ConfigError(
            f"No cache at {path}; it is created by the first run with cache.mode=readwrite "
            "(or point cache.path at an existing file)."
        )
    return WebCache.from_config(cfg.cache, cfg.resolved_cache_dir(), mode="readwrite")


def register(app: typer.Typer) -> None:
    """Add the ``cache`` command group."""
    cache_app = typer.Typer(help="Inspect and maintain the record/replay cache of web calls.", no_args_is_help=True)

    @cache_app.command("stats")
    def stats(
        config: Path | None = ConfigOption,
        overrides: list[str] | None = SetOption,
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
    ) -> None:
        """Entries, hit rate, size, calls and money saved, per kind and backend."""
        with _open(config, overrides, must_exist=True) as cache:
            summary = cache.stats().to_dict()
        if as_json:
            typer.echo(json.dumps(summary))
            return
        table = Table(title=f"{summary['path']} ({summary['size_bytes'] / 1e6:.1f} MB)")
        for column in ("kind", "backend", "entries", "hits", "misses", "calls saved", "$ saved"):
            table.add_column(column, justify="left" if column in ("kind", "backend") else "right")
        for row in summary["by_backend"]:
            table.add_row(row["kind"], row["backend"], str(row["entries"]), str(row["hits"]), str(row["misses"]),
                          str(row["calls_saved"]), f"{row['money_saved']:.4f}")
        console.print(table)
        console.print(
            f"hit rate {summary['hit_rate']:.1%}, {summary['calls_saved']} calls saved, "
            f"${summary['money_saved']:.4f} saved", highlight=False
        )

    @cache_app.command("export")
    def export(
        out: Path = typer.Argument(..., help="JSONL file to write."),
        kind: str | None = typer.Option(None, help="Only this kind: search, fetch or reader."),
        config: Path | None = ConfigOption,
        overrides: list[str] | None = SetOption,
    ) -> None:
        """Write records as JSON lines, to share a recording or move it to another machine."""
        with _open(config, overrides, must_exist=True) as cache:
            n = cache.export_jsonl(out, kind=kind)
        typer.echo(f"exported {n} records to {out}")

    @cache_app.command("import")
    def import_(
        src: Path = typer.Argument(..., exists=True, dir_okay=False, help="JSONL file written by `cache export`."),
        config: Path | None = ConfigOption,
        overrides: list[str] | None = SetOption,
    ) -> None:
        """Load exported records; where a record exists on both sides the newer one is kept."""
        with _open(config, overrides, must_exist=False) as cache:
            n = cache.import_jsonl(src)
        typer.echo(f"imported {n} records from {src}")

    @cache_app.command("prune")
    def prune(
        older_than_days: float | None = typer.Option(None, help="Also delete every record older than this."),
        expired: bool = typer.Option(True, "--expired/--no-expired", help="Delete records past their kind's TTL."),
        config: Path | None = ConfigOption,
        overrides: list[str] | None = SetOption,
    ) -> None:
        """Delete expired or old records and shrink the file's write-ahead log."""
        older = older_than_days * 86400.0 if older_than_days is not None else None
        with _open(config, overrides, must_exist=True) as cache:
            n = cache.prune(expired=expired, older_than_s=older)
        typer.echo(f"deleted {n} records")

    app.add_typer(cache_app, name="cache")
