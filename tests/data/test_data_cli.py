"""``deepresearcher data show|mix`` through the real command functions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from deepresearcher.cli import data_cmd
from deepresearcher.data import load_benchmark, load_file
from deepresearcher.errors import ConfigError


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    app.callback()(lambda: None)
    data_cmd.register(app)
    return app


def test_show_prints_counts_and_examples(app: typer.Typer, shared_data_dir: Path) -> None:
    """`data show` prints the task count per source and the first examples with their golds."""
    result = CliRunner().invoke(app, ["data", "show", "deepresearcher", "--split", "dev", "--examples", "1"])
    assert result.exit_code == 0, result.output
    assert "875 tasks" in result.output and "bamboogle" in result.output
    assert "tq_qg_3477" in result.output and "türkiye" in result.output


def test_mix_writes_verl_parquet_without_eval_questions(app: typer.Typer, shared_data_dir: Path,
                                                        tmp_path: Path) -> None:
    """`data mix` writes a verl parquet at the ratios, with a JSON report, excluding DeepResearcher's test set."""
    out = tmp_path / "mix.parquet"
    args = ["data", "mix", "--out", str(out), "--ratio", "nq:open_dev=1", "--ratio", "hotpotqa:full_dev=3",
            "--total", "40", "--seed", "2"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    tasks = load_file(out)
    assert len(tasks) == 40 and sum(t.source == "nq" for t in tasks) == 10
    assert all(t.split == "train" for t in tasks)
    report = json.loads(out.with_suffix(".mix.json").read_text())
    assert report["counts"] == {"hotpotqa": 30, "nq": 10} and report["dropped_eval_overlap"]["nq"] > 0
    test_questions = {t.question for t in load_benchmark("deepresearcher", "test")}
    assert not any(t.question in test_questions for t in tasks)


def test_bad_ratio_is_a_config_error(app: typer.Typer, tmp_path: Path) -> None:
    """A malformed --ratio names the expected form."""
    result = CliRunner().invoke(app, ["data", "mix", "--out", str(tmp_path / "m.parquet"), "--ratio", "nq"])
    assert isinstance(result.exception, ConfigError) and "NAME[:SPLIT]=WEIGHT" in str(result.exception)
