"""``deepresearcher bench NAME``: run a benchmark from ``deepresearcher/bench/NAME.py`` and print its JSON.

Benchmarks ship inside the package (the checkout's ``bench/`` links there), so an installed
deepresearcher runs them from any folder: each module has ``main(argv: list[str]) -> dict``. Speed and
memory targets are checked there, never in unit tests.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import typer

from deepresearcher.errors import ConfigError

BENCH_DIR = Path(__file__).resolve().parents[1] / "bench"
_HELP = ("--help", "-h")


def available() -> list[str]:
    return sorted(p.stem for p in BENCH_DIR.glob("*.py") if not p.stem.startswith("_"))


def bench(
    ctx: typer.Context,
    name: str = typer.Argument(None, help="Benchmark name: a file bench/NAME.py (e.g. search, env, rollout)."),
) -> None:
    """Run a benchmark; extra arguments go to it (e.g. `bench search --docs 100000`).

    `bench NAME --help` prints that benchmark's own options; `bench --help` this help.
    """
    if name in _HELP:
        typer.echo(ctx.get_help())
        raise typer.Exit()
    if name is None:
        raise ConfigError(f"Name a benchmark: {', '.join(available())} (`bench NAME --help` lists its options).")
    path = BENCH_DIR / f"{name}.py"
    if not path.is_file():
        raise ConfigError(f"No benchmark {name!r}; available: {', '.join(available())}.")
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module  # dataclasses resolve string annotations through sys.modules
    spec.loader.exec_module(module)
    result = module.main([a for a in ctx.args if a != "--json"])
    typer.echo(json.dumps(result, indent=2))
    if result.get("exit_code"):  # a benchmark that is also a check (bench gpu) fails the command when the check fails
        raise typer.Exit(result["exit_code"])


def register(app: typer.Typer) -> None:
    # No help option of its own: `--help` after NAME belongs to the benchmark (its argparse prints its options).
    app.command("bench", context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                                           "help_option_names": []},
                epilog="Example: deepresearcher bench search --json")(bench)
