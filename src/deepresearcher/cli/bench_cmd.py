"""``deepresearcher bench NAME``: run a benchmark from ``bench/NAME.py`` and print its JSON.

Benchmarks live in the repository's ``bench/`` folder (not in the installed package): each module
has ``main(argv: list[str]) -> dict``. Speed and memory targets are checked there, never in unit tests.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import typer

from deepresearcher.errors import ConfigError


def bench_dir() -> Path:
    """``bench/`` of the current directory, else of the source checkout this package runs from."""
    for candidate in (Path.cwd() / "bench", Path(__file__).resolve().parents[3] / "bench"):
        if candidate.is_dir():
            return candidate
    raise ConfigError("No bench/ folder found; run `deepresearcher bench` from the repository root.")


def available() -> list[str]:
    return sorted(p.stem for p in bench_dir().glob("*.py") if not p.stem.startswith("_"))


def bench(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Benchmark name: a file bench/NAME.py (e.g. search, env, rollout)."),
) -> None:
    """Run a benchmark; extra arguments go to it (e.g. `bench search --docs 100000`)."""
    path = bench_dir() / f"{name}.py"
    if not path.is_file():
        raise ConfigError(f"No benchmark {name!r}; available: {', '.join(available())}.")
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module  # dataclasses resolve string annotations through sys.modules
    spec.loader.exec_module(module)
    result = module.main([a for a in ctx.args if a != "--json"])
    typer.echo(json.dumps(result, indent=2))


def register(app: typer.Typer) -> None:
    app.command("bench", context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
                epilog="Example: deepresearcher bench search --json")(bench)
