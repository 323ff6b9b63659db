"""``deepresearcher world ...``: build and inspect synthetic worlds."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from deepresearcher.cli.common import ConfigOption, SetOption, resolve_config

console = Console()
world_app = typer.Typer(help="Build and inspect the synthetic web.", no_args_is_help=True)


@world_app.command("build", epilog="Example: deepresearcher world build --seed 7 --size small --out worlds/w7")
def build(
    out: Path = typer.Option(..., "--out", help="Directory to write pages.jsonl, tasks/ and manifest.json to."),
    seed: int = typer.Option(7, help="Generator seed: the same seed and size give byte-identical files."),
    size: str = typer.Option("small", help="tiny | small | medium | large."),
    names_seed: int = typer.Option(None, "--names-seed", help="Share entity names with other worlds of this "
                                   "names seed (facts still follow --seed)."),
    background_sentences: int = typer.Option(2, "--background-sentences", min=0, max=2, help="Prose sentences "
                                             "between an article's lead and its infobox (0: shorter pages)."),
    index: bool = typer.Option(True, help="Also build the search index in OUT/index."),
) -> None:
    """Generate a world (pages, tasks with gold answers and evidence) and index it."""
    import time

    from deepresearcher.errors import ConfigError
    from deepresearcher.web.backends.local_build import build_index
    from deepresearcher.world import build_world, iter_pages
    from deepresearcher.world.knowledge import SIZES

    if size not in SIZES:
        raise ConfigError(f"Unknown world size {size!r}; use one of {', '.join(SIZES)}.")
    started = time.perf_counter()
    with console.status(f"Generating world seed={seed} size={size}..."):
        manifest = build_world(seed, size, out, names_seed=names_seed, background_sentences=background_sentences)
    if index:
        with console.status(f"Indexing {manifest['pages']} pages..."):
            build_index(iter_pages(out), out / "index")
    _print_manifest(manifest, out)
    console.print(f"Built in {time.perf_counter() - started:.1f}s.")


@world_app.command("show")
def show(
    world: Path = typer.Argument(None, help="A built world directory; default: the default world."),
    config: Path = ConfigOption,
    overrides: list[str] = SetOption,
) -> None:
    """Summarize a world and print a few of its test tasks."""
    from deepresearcher.web.local_world import ensure_world
    from deepresearcher.world import load_manifest, load_tasks

    world = world or ensure_world(resolve_config(config, overrides))
    _print_manifest(load_manifest(world), world)
    if (world / "index").is_dir():
        console.print(_conflict_ranking(world), highlight=False)
    for task in load_tasks(world, "test")[:5]:
        console.print(f"[bold]{task.type}[/] {task.question} -> [green]{' | '.join(task.golds)}[/]")


def _conflict_ranking(world: Path) -> str:
    """How the world's search ranks each conflict's sources for the fact's natural query (top 2, the quickstart's
    ``search.top_k``): what answering from the first hit costs there (docs/ARCHITECTURE.md, "Sources disagree")."""
    from deepresearcher.web.backends.local import LocalIndex
    from deepresearcher.world import load_tasks

    index = LocalIndex(world / "index")
    conflicts = [t.chain[0] for split in ("train", "dev", "test") for t in load_tasks(world, split) if t.type == "conflict"]
    if not conflicts or not conflicts[0].contradicting_urls:
        return f"conflict tasks: {len(conflicts)} (no contradicting pages recorded: a world before generator v4)"
    first = both = 0
    for hop in conflicts:
        top = [hit.url for hit in index.search(hop.query, 2)]
        first += bool(top) and top[0] in hop.contradicting_urls
        both += bool(set(top) & set(hop.evidence_urls)) and bool(set(top) & set(hop.contradicting_urls))
    return (f"conflict tasks: {len(conflicts)}; for the fact's query the contradicting page ranks first in {first} "
            f"({first / len(conflicts):.1%}); a reliable and the contradicting page are the top 2 in {both}")


@world_app.command(
    "baselines",
    epilog="Example: deepresearcher world baselines --config configs/quickstart.yaml --set train.eval_world=dev",
)
def baselines(
    as_json: bool = typer.Option(False, "--json", help="Print the baselines as JSON."),
    config: Path = ConfigOption,
    overrides: list[str] = SetOption,
) -> None:
    """What answering without tools scores on a run's held-out tasks: the no-tools baselines, fitted on
    the run's training tasks only (the same tasks `quickstart`, `sft` and `train` would use)."""
    import json

    from deepresearcher.eval.baselines import fit_baselines, margin_rows
    from deepresearcher.train.tasks import task_sets

    sets = task_sets(resolve_config(config, overrides))
    report = fit_baselines(sets.sft + sets.grpo).evaluate(sets.test)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
        return
    rows = margin_rows(report, {})
    table = Table(title=f"No-tools baselines: F1 on {len(sets.test)} held-out tasks, fitted on "
                        f"{len(sets.sft) + len(sets.grpo)} training tasks")
    for column in rows[0]:
        table.add_column(column, justify="left" if column in ("type", "best uses") else "right")
    for row in rows:
        table.add_row(*(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row.values()))
    console.print(table)


def _print_manifest(manifest: dict, where: Path) -> None:
    table = Table(title=f"World seed={manifest['seed']} size={manifest['size']} ({where})")
    table.add_column("split")
    types = sorted({t for split in manifest["tasks"].values() for t in split})
    for kind in types:
        table.add_column(kind, justify="right")
    for split, counts in manifest["tasks"].items():
        table.add_row(split, *(str(counts.get(kind, 0)) for kind in types))
    console.print(table)
    entities = ", ".join(f"{n} {k}" for k, n in manifest["entities"].items())
    console.print(f"{manifest['pages']} pages; entities: {entities}; generator version "
                  f"{manifest.get('generator_version', 1)}")


def register(app: typer.Typer) -> None:
    app.add_typer(world_app, name="world")
