"""``eval --dry-run``: every row of DeepResearcher's dev parquet validates; bad rows are all reported."""

from __future__ import annotations

import json

import orjson
from typer.testing import CliRunner

from deepresearcher.cli.main import app
from deepresearcher.config import Config
from deepresearcher.eval.dryrun import dry_run


def test_dry_run_validates_all_875_dev_rows(tmp_path, shared_data_dir):
    """The CLI reads all 875 rows (125 per benchmark), finds no problem, runs no model, writes nothing."""
    dev = shared_data_dir / "deepresearcher" / "dev.parquet"
    result = CliRunner().invoke(app, ["eval", "--data", str(dev), "--dry-run", "--out", str(tmp_path / "x")])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["ok"] and report["rows"] == report["valid"] == 875
    assert report["per_benchmark"] == {b: 125 for b in ("nq", "tq", "hotpotqa", "2wiki", "musique", "popqa", "bamboogle")}
    assert not (tmp_path / "x").exists()


def test_dry_run_reports_every_bad_row(tmp_path):
    """Rows without a question or gold, and repeated ids, are each named; the exit code is 1."""
    rows = [
        {"id": "a", "question": "Q one?", "golden_answers": ["x"]},
        {"id": "b", "question": "", "golden_answers": ["x"]},
        {"id": "c", "question": "Q three?", "golden_answers": []},
        {"id": "a", "question": "Q four?", "golden_answers": ["y"]},
        {"id": "d", "question": "Q five?", "golden_answers": ["the"]},
    ]
    path = tmp_path / "nq.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    report = dry_run(Config(), path)
    assert (report.rows, report.valid) == (5, 3)
    text = " ".join(report.problems)
    assert "row 1" in text and "row 2" in text and "appears 2 times" in text and "survives normalization" in text
    assert not report.ok
    result = CliRunner().invoke(app, ["eval", "--data", str(path), "--dry-run", "--out", str(tmp_path / "x")])
    assert result.exit_code == 1


def test_dry_run_of_registry_benchmarks_with_splits_and_limit(tmp_path, shared_data_dir):
    """--benchmarks takes `name:split`; --limit caps each; an unknown benchmark is a reported problem."""
    args = ["eval", "-b", "hotpotqa:distractor_dev,2wiki:flashrag_dev,nosuch", "--limit", "5", "--dry-run",
            "--data-dir", str(shared_data_dir), "--out", str(tmp_path / "x")]
    result = CliRunner().invoke(app, args)
    report = json.loads(result.output)
    assert report["per_benchmark"] == {"hotpotqa:distractor_dev": 5, "2wiki:flashrag_dev": 5}
    assert report["problem_count"] == 1 and "nosuch" in report["problems"][0] and result.exit_code == 1


def test_dry_run_of_a_data_file_checks_only_the_benchmarks_named(tmp_path):
    """`--data FILE -b NAME` checks the rows `eval` would run (those of NAME), and naming a benchmark the
    file lacks is a problem that lists what the file holds, as `eval` itself says."""
    rows = [{"id": f"{source}{i}", "question": f"Q {i}?", "golden_answers": ["x"], "data_source": source}
            for source in ("nq", "hotpotqa") for i in range(3)]
    rows.append({"id": "dup", "question": "Q?", "golden_answers": ["x"], "data_source": "nq"})
    rows.append({"id": "dup", "question": "Q again?", "golden_answers": ["y"], "data_source": "nq"})
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))

    def check(names: str) -> dict:
        out = tmp_path / "x"
        result = CliRunner().invoke(app, ["eval", "--data", str(path), "-b", names, "--dry-run", "--out", str(out)])
        return json.loads(result.output) | {"exit_code": result.exit_code}

    hotpot = check("hotpotqa")
    assert hotpot["per_benchmark"] == {"hotpotqa": 3} and hotpot["ok"] and hotpot["exit_code"] == 0
    both = check("hotpotqa,nq")
    assert both["per_benchmark"] == {"hotpotqa": 3, "nq": 5} and "appears 2 times" in " ".join(both["problems"])
    missing = check("musique")
    assert missing["exit_code"] == 1 and "its rows are from: hotpotqa, nq" in " ".join(missing["problems"])
