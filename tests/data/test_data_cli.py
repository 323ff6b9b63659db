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


def test_contaminate_against_a_real_openai_server(app: typer.Typer, tmp_path: Path) -> None:
    """`data contaminate` asks an OpenAI-compatible server closed-book, drops what it knows, and resumes."""
    from deepresearcher.testing.openai_server import OpenAIEmulator, Reply

    rows = [{"question": f"What is the code of item {i}?", "answer": [f"code{i}"]} for i in range(6)]
    data = tmp_path / "nq.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def knows_even_items(body: dict) -> Reply:
        number = int(body["messages"][-1]["content"].rsplit("item ", 1)[1].rstrip("?"))
        return Reply(text=f"<answer>code{number}</answer>" if number % 2 == 0 else "no idea")

    decisions, kept = tmp_path / "decisions.jsonl", tmp_path / "kept.parquet"
    server = OpenAIEmulator(responder=knows_even_items)
    with server.running():
        args = ["data", "contaminate", "nq", "--path", str(data), "--decisions", str(decisions), "--k", "2",
                "--kind", "openai", "--model", "emu", "--base-url", server.base_url, "--kept", str(kept)]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        assert "kept 3, dropped 3" in result.output
        assert [t.question for t in load_file(kept)] == [f"What is the code of item {i}?" for i in (1, 3, 5)]
        assert len(server.requests) == 3 * 1 + 3 * 2  # known: stop at the first sample; unknown: k samples
        assert server.requests[0]["temperature"] == 1.0
        again = CliRunner().invoke(app, args)
        assert again.exit_code == 0 and "6 decided by an earlier run" in again.output
        assert len(server.requests) == 9  # nothing asked twice
