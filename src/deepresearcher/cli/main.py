"""The ``deepresearcher`` command.

Each topic lives in its own module under ``cli/`` with a ``register(app)`` function; heavy imports
(torch, transformers, tantivy) happen inside the commands, so ``deepresearcher --help`` is instant.
Known errors (``DeepResearcherError``) print one ``Error: ...`` line and exit with code 2; usage
mistakes get click's short usage message and exit 2; anything else is a bug and shows its traceback.
"""

from __future__ import annotations

import importlib
import logging
import sys

import typer
from rich.console import Console

from deepresearcher.errors import DeepResearcherError

# Modules under deepresearcher.cli that each add their commands with ``register(app)``.
COMMAND_MODULES: tuple[str, ...] = (
    "config_cmd", "env_cmd", "world_cmd", "search_cmd", "bench_cmd", "cache_cmd", "serve_cmd", "models_cmd", "data_cmd",
    "research_cmd", "eval_cmd", "train_cmd",
)

app = typer.Typer(
    name="deepresearcher",
    help="Train LLM deep-research agents with reinforcement learning against real web search.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err_console = Console(stderr=True)


@app.callback()
def _root(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log INFO messages to stderr.")) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s: %(message)s",
    )


for _module in COMMAND_MODULES:
    importlib.import_module(f"deepresearcher.cli.{_module}").register(app)


def main() -> None:
    """Entry point: run the app, turning known errors into one readable line.

    Click's standalone mode handles usage mistakes (a short usage message, exit 2), ``typer.Exit``
    and Ctrl-C; what it lets through is either one of our errors or a bug.
    """
    try:
        app(prog_name="deepresearcher")
    except DeepResearcherError as exc:
        err_console.print(f"[bold red]Error:[/] {exc}", highlight=False)
        sys.exit(2)


if __name__ == "__main__":
    main()
