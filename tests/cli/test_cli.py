"""The ``deepresearcher`` command, run as a user runs it (a real subprocess through the entry point)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import orjson


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "deepresearcher.cli.main", *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200"}, cwd=cwd, timeout=300)


def test_world_build_then_search_and_browse_it(tmp_path: Path) -> None:
    out = tmp_path / "w"
    built = run("world", "build", "--seed", "5", "--size", "tiny", "--out", str(out))
    assert built.returncode == 0, built.stderr
    assert (out / "pages.jsonl").is_file() and (out / "tasks" / "test.jsonl").is_file()
    task = orjson.loads((out / "tasks" / "test.jsonl").read_bytes().splitlines()[0])
    found = run("search", task["chain"][0]["query"], "--index", str(out / "index"), "--top-k", "3", "--json")
    assert found.returncode == 0, found.stderr
    [result] = json.loads(found.stdout)
    assert result["search_query"] == task["chain"][0]["query"] and len(result["web_page_info_list"]) == 3
    url = task["evidence_urls"][0]
    read = run("browse", url, "--question", task["question"], "--index", str(out / "index"), "--json")
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout)[0]["url"] == url


def test_world_baselines_fits_on_training_tasks_and_scores_held_out_ones(tmp_path: Path) -> None:
    common = ("--set", f"cache_dir={tmp_path}", "--set", "world.size=tiny", "--set", "train.sft.num_tasks=10")
    shown = run("world", "baselines", *common)
    assert shown.returncode == 0, shown.stderr
    assert "No-tools baselines" in shown.stdout and "relation prior" in shown.stdout
    as_json = run("world", "baselines", "--json", *common)
    report = json.loads(as_json.stdout)
    tests = [orjson.loads(line) for line in next((tmp_path / "worlds").glob("seed7-tiny-v*/tasks/test.jsonl")).read_bytes().splitlines()]
    assert report["n"]["all"] == len(tests) and 0 <= report["f1"]["best"]["all"] <= 1
    assert set(report["best_uses"]) == {t["type"] for t in tests}


def test_index_build_reports_bad_lines(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"url": "u1", "title": "A", "text": "alpha"}\n{"title": "no url"}\n')
    built = run("index", "build", "--corpus", str(corpus), "--out", str(tmp_path / "i"))
    assert built.returncode == 0, built.stderr
    assert "skipped line 2" in built.stdout and "Indexed 1 documents" in built.stdout


def test_search_uses_the_default_world_with_no_flags(tmp_path: Path) -> None:
    """With no index and no config, the default world is built on first use in the cache directory."""
    found = run("search", "population", "--json", "--set", f"cache_dir={tmp_path}", "--set", "world.size=tiny")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)[0]["web_page_info_list"]
    assert list((tmp_path / "worlds").glob("seed7-tiny-v*/index"))


def test_known_errors_print_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = run("search", "x", "--index", str(tmp_path / "none"))
    assert missing.returncode == 2
    assert missing.stderr.startswith("Error: No search index") and "Traceback" not in missing.stderr
    typo = run("search", "x", "--set", "search.topk=3")
    assert typo.returncode == 2 and "search.topk: unknown key" in typo.stderr


def test_usage_mistakes_get_a_short_usage_message_and_exit_2() -> None:
    """An unknown option or command is click's few-line usage message (with its suggestion), not a traceback."""
    for args, says in [
        (["search", "--bogus", "x"], "No such option: --bogus"),
        (["serch", "x"], "Did you mean 'search'"),
        (["quickstart", "--out", "somewhere"], "No such option: --out"),
    ]:
        done = run(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.startswith("Usage: deepresearcher") and says in done.stderr
        assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) < 8, done.stderr


def test_bench_search_prints_json(tmp_path: Path) -> None:
    """Benchmarks ship with the package: they run from any folder, not only the repository's root."""
    result = run("bench", "search", "--docs", "2000", "--queries", "50", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (size,) = json.loads(result.stdout)["sizes"]
    assert size["documents"] == 2000 and size["latency_ms_p50"] > 0 and size["index_bytes"] > 0


def test_env_reports_versions_for_bug_reports() -> None:
    result = run("env")
    assert result.returncode == 0, result.stderr
    lines = dict(line[2:].split(": ", 1) for line in result.stdout.splitlines())
    import torch

    assert lines["torch"] == torch.__version__ and lines["deepresearcher"] == "0.1.0"
    assert lines["vllm"] in ("not installed",) or lines["vllm"][0].isdigit()


def test_bench_name_help_shows_the_benchmarks_options() -> None:
    """`bench NAME --help` is the benchmark's own help; `bench --help` the command's; `bench` alone names them."""
    own = run("bench", "generate", "--help")
    assert own.returncode == 0 and "--requests" in own.stdout and "--prompt-tokens" in own.stdout
    command = run("bench", "--help")
    assert command.returncode == 0 and "Benchmark name" in command.stdout
    bare = run("bench")
    assert bare.returncode == 2 and "generate" in bare.stderr and "search" in bare.stderr
