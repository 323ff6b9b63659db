"""Machine output is only that output on stdout: every ``--json`` command, ``bench … --json``, ``config show``.

Each command runs as a user runs it (a subprocess through the entry point) and its whole stdout must parse;
notices (which policy answers, what is being built) go to stderr. A new command with ``--json`` fails
``test_every_json_command_is_covered`` until it has a case here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer.core
import typer.main
import yaml

from deepresearcher.cli.main import app
from deepresearcher.testing.openai_server import OpenAIEmulator, Reply

TINY = ["--set", "world.size=tiny"]


def deepresearcher(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "deepresearcher.cli.main", *args], capture_output=True, text=True,
                            env={**os.environ, **env, "COLUMNS": "200"}, cwd=cwd, timeout=600)
    assert result.returncode == 0, result.stderr
    return result


def json_commands() -> set[str]:
    """The command paths (``cache stats``) that take ``--json``."""
    found: set[str] = set()

    def walk(command, path: list[str]) -> None:
        if isinstance(command, typer.core.TyperGroup):
            for name, sub in command.commands.items():
                walk(sub, [*path, name])
        elif any("--json" in p.opts for p in command.params):
            found.add(" ".join(path))

    walk(typer.main.get_command(app), [])
    return found


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A folder to run in, with a private cache directory (the tiny world is built there once)."""
    where = tmp_path_factory.mktemp("cli")
    env = {"XDG_CACHE_HOME": str(where / "xdg")}
    deepresearcher("world", "show", *TINY, cwd=where, env=env)
    return where, env


@pytest.fixture(scope="module")
def policy_server():
    """A policy that answers at once, so `research` runs a whole (one-turn) episode."""
    with OpenAIEmulator(responder=lambda body: Reply(text="<answer>Velmora</answer>")).running() as server:
        yield server


def _policy(server: OpenAIEmulator) -> list[str]:
    return ["--set", f"agent.policy=openai:{server.base_url}", "--set", "agent.tokenizer=qwen2.5",
            "--set", "agent.max_turns=1"]


COVERED = {"search", "browse", "research", "cache stats", "models list", "world baselines", "bench"}


def test_every_json_command_is_covered() -> None:
    assert json_commands() | {"bench"} == COVERED


def test_search_and_browse_json(home) -> None:
    where, env = home
    found = json.loads(deepresearcher("search", "population", "--json", *TINY, cwd=where, env=env).stdout)
    url = found[0]["web_page_info_list"][0]["url"]
    read = json.loads(deepresearcher("browse", url, "-q", "population", "--json", "--set", "browse.reader=raw",
                                     *TINY, cwd=where, env=env).stdout)
    assert read[0]["url"] == url


def test_cache_stats_json(home) -> None:
    where, env = home
    from deepresearcher.web.cache import WebCache

    with WebCache(where / "web.sqlite") as cache:
        cache.put_sync("search", "serper", {"query": "population"}, {}, [{"title": "t", "url": "u", "snippet": "s"}])
    stats = json.loads(deepresearcher("cache", "stats", "--json", "--set", f"cache.path={where / 'web.sqlite'}",
                                      cwd=where, env=env).stdout)
    assert stats["entries"] == 1


def test_models_list_json(home) -> None:
    where, env = home
    assert isinstance(json.loads(deepresearcher("models", "list", "--json", cwd=where, env=env).stdout), list)


def test_world_baselines_json(home) -> None:
    where, env = home
    report = json.loads(deepresearcher("world", "baselines", "--json", *TINY, cwd=where, env=env).stdout)
    assert report


def test_bench_json(home) -> None:
    where, env = home
    result = json.loads(deepresearcher("bench", "search", "--docs", "500", "--queries", "20", "--json",
                                       cwd=where, env=env).stdout)
    assert result["sizes"]


def test_config_show_is_yaml_of_the_config(home) -> None:
    where, env = home
    shown = yaml.safe_load(deepresearcher("config", "show", "--set", "search.top_k=7", cwd=where, env=env).stdout)
    assert shown["search"]["top_k"] == 7


def test_research_json_with_the_embedded_notice(home, policy_server) -> None:
    """Without --policy or --config, research says which policy answers: on stderr, not before the JSON."""
    where, env = home
    result = deepresearcher("research", "Who founded Velmora Works?", "--json", *_policy(policy_server), *TINY,
                            cwd=where, env=env)
    assert json.loads(result.stdout)["answer"] == "Velmora"
    assert "policy:" in result.stderr


def test_research_json_after_the_quickstart(home, policy_server, tmp_path) -> None:
    """With the quickstart's run folder present, its notice goes to stderr too; stdout is the trajectory."""
    _, env = home
    run = tmp_path / "runs" / "quickstart"
    (run / "model").mkdir(parents=True)
    (run / "model" / "config.json").write_text("{}")
    (run / "config.yaml").write_text(yaml.safe_dump({"world": {"size": "tiny"}, "train": {"num_worlds": 2}}))
    result = deepresearcher("research", "Who founded Velmora Works?", "--json", *_policy(policy_server),
                            cwd=tmp_path, env=env)
    assert json.loads(result.stdout)["answer"] == "Velmora"
    assert "the agent trained by the quickstart" in result.stderr


def test_eval_of_a_runs_model_takes_the_runs_config(home, tiny_model_dir, tmp_path) -> None:
    """`eval --policy runs/X/model` without --config evaluates the model as run X trained it (runs/X/config.yaml:
    here one turn of two tokens) and says so."""
    _, env = home
    run = tmp_path / "runs" / "x"
    run.mkdir(parents=True)
    (run / "model").symlink_to(tiny_model_dir)
    (run / "config.yaml").write_text(yaml.safe_dump({"world": {"size": "tiny"},
                                                     "agent": {"max_turns": 1, "max_tokens_per_turn": 2}}))
    result = deepresearcher("eval", "--policy", str(run / "model"), "-b", "world", "--limit", "1",
                            "--out", str(tmp_path / "out"), cwd=tmp_path, env=env)
    assert f"config: {run / 'config.yaml'} (the run that trained" in result.stderr
    evaluated = yaml.safe_load((tmp_path / "out" / "config.yaml").read_text())
    assert (evaluated["agent"]["max_turns"], evaluated["agent"]["max_tokens_per_turn"]) == (1, 2)
