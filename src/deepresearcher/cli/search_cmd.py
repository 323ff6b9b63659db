"""``deepresearcher index build``, ``search`` and ``browse``: the local search engine and the two tools."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer
from rich.console import Console

from deepresearcher.cli.common import ConfigOption, SetOption, resolve_config
from deepresearcher.errors import DataError

console = Console()
index_app = typer.Typer(help="Build search indexes over a corpus or a world.", no_args_is_help=True)


@index_app.command("build", epilog="Example: deepresearcher index build --corpus wiki-18.jsonl --out indexes/wiki-18")
def index_build(
    corpus: Path = typer.Option(..., "--corpus", help="JSONL with url, title, and text or html per line, or "
                                "Search-R1's id and contents (wiki-18); or a built world directory."),
    out: Path = typer.Option(..., "--out", help="Index directory to create (replaced if it exists)."),
    resume: bool = typer.Option(False, "--resume", help="Go on from the last commit of an interrupted build "
                                "of the same corpus into --out (commits come every 6M documents)."),
) -> None:
    """Index a corpus with tantivy (BM25), streaming it line by line."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from deepresearcher.web.backends.local_build import BuildStats, build_index, read_corpus, resume_point

    source = corpus / "pages.jsonl" if corpus.is_dir() else corpus
    if not source.is_file():
        raise DataError(f"Corpus file {source} does not exist.")
    stats = (resume_point(out, source) if resume else None) or BuildStats()
    if resume:
        console.print(f"Resuming after line {stats.lines:,} ({stats.documents:,} documents indexed)."
                      if stats.offset else "No interrupted build of this corpus there; starting from the beginning.")
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console) as bar:
        task = bar.add_task(f"Indexing {source}", total=source.stat().st_size, completed=stats.offset)

        def progress(documents: int) -> None:
            bar.update(task, completed=stats.offset, description=f"Indexing {source.name}: {documents:,} documents")

        build_index(read_corpus(source, stats), out, stats, resume=stats.offset > 0, corpus=source,
                    on_progress=progress)
        progress(stats.documents)  # the last call above may be thousands of documents before the end
    for problem in stats.problems:
        console.print(f"[yellow]skipped line {problem.line}:[/] {problem.reason}")
    if stats.skipped > len(stats.problems):
        console.print(f"[yellow]... and {stats.skipped - len(stats.problems)} more skipped lines[/]")
    console.print(f"Indexed {stats.documents:,} documents into {out} in {stats.seconds:.1f}s "
                  f"({stats.skipped} skipped).")


def _config(config: Path | None, overrides: list[str] | None, index: Path | None):
    cfg = resolve_config(config, overrides)
    if index is not None:
        cfg.search.backend, cfg.search.index = "local", index
    return cfg


def search(
    query: list[str] = typer.Argument(..., help="One or more queries."),
    index: Path = typer.Option(None, "--index", help="Index directory; default: the default world's index."),
    top_k: int = typer.Option(None, "--top-k", help="Hits per query (default: search.top_k)."),
    as_json: bool = typer.Option(False, "--json", help="Print the web_search observation as JSON."),
    config: Path = ConfigOption,
    overrides: list[str] = SetOption,
) -> None:
    """Search like the agent's web_search tool does."""
    cfg = _config(config, overrides, index)
    if top_k is not None:
        cfg.search.top_k = top_k
    outcome = asyncio.run(_run_tool(cfg, "web_search", {"query": query}, question=" ".join(query)))
    if as_json or outcome.error:
        typer.echo(outcome.text)
        return
    for result in outcome.raw:
        console.rule(f"[bold]{result['search_query']}")
        if result.get("error"):
            console.print(f"[red]{result['error']}[/]")
        for i, hit in enumerate(result["web_page_info_list"], 1):
            console.print(f"[bold cyan]{i}. {hit['title']}[/]  [dim]{hit['url']}[/]")
            console.print(f"   {hit['quick_summary']}", highlight=False)


def browse(
    url: list[str] = typer.Argument(..., help="One or more URLs."),
    question: str = typer.Option(..., "--question", "-q", help="What the reader should look for."),
    index: Path = typer.Option(None, "--index", help="Index directory; default: the default world's index."),
    as_json: bool = typer.Option(False, "--json", help="Print the browse_webpage observation as JSON."),
    config: Path = ConfigOption,
    overrides: list[str] = SetOption,
) -> None:
    """Read pages like the agent's browse_webpage tool does."""
    cfg = _config(config, overrides, index)
    outcome = asyncio.run(_run_tool(cfg, "browse_webpage", {"url_list": url}, question=question))
    if as_json or outcome.error:
        typer.echo(outcome.text)
        return
    for page in outcome.raw:
        console.rule(f"[bold]{page['url']}")
        console.print(f"[red]{page['error']}[/]" if "error" in page else page["information"], highlight=False)


async def _run_tool(cfg, name: str, arguments: dict, question: str):
    from deepresearcher.agent.tools import ToolBox, ToolContext
    from deepresearcher.web import make_environment

    env = make_environment(cfg)
    try:
        return await ToolBox(env, cfg).call(name, arguments, ToolContext(question))
    finally:
        await env.aclose()


def register(app: typer.Typer) -> None:
    app.add_typer(index_app, name="index")
    app.command("search", epilog='Example: deepresearcher search "Velmora population" --top-k 5')(search)
    app.command("browse", epilog='Example: deepresearcher browse URL --question "Who founded X?"')(browse)
