"""Slow tools (``env.latency``): deterministic heavy-tailed delays that overlap under asyncio, and replay.

The environment under the delays is a real one where the behaviour needs it (the small world's index,
through ``make_environment``); elsewhere a recorder of calls stands in for it, so the delays are all that
takes time.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import orjson
import pytest

from deepresearcher.agent.tools import ToolBox
from deepresearcher.config import LatencyConfig, load_config
from deepresearcher.errors import ConfigError
from deepresearcher.train.oracle import OracleResearcher
from deepresearcher.web import make_environment
from deepresearcher.web.client import RemoteEnvironment
from deepresearcher.web.environment import WebEnvironment
from deepresearcher.web.interface import Environment
from deepresearcher.web.latency import DelayModel, LatencyEnvironment, read_latencies
from deepresearcher.web.types import BrowseResult, QueryResult
from deepresearcher.world import load_tasks


class InstantEnvironment:
    """Answers every call at once with empty results, and remembers the calls."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds
        self.calls: list[tuple[str, object]] = []
        self.closed = False

    async def search(self, queries: list[str], top_k: int | None = None) -> list[QueryResult]:
        self.calls.append(("search", queries))
        await asyncio.sleep(self.seconds)
        return [QueryResult(query=q, hits=[]) for q in queries]

    async def browse(self, question, urls, notes=None, queries=None) -> list[BrowseResult]:
        self.calls.append(("browse", urls))
        await asyncio.sleep(self.seconds)
        return [BrowseResult(url=u, error="not here") for u in urls]

    async def aclose(self) -> None:
        self.closed = True


def _lognormal(**fields) -> LatencyConfig:
    return LatencyConfig(distribution="lognormal", **fields)


def _watch_delays(env: LatencyEnvironment) -> dict[tuple[str, str, int], float]:
    """Fills with the delay each of ``env``'s calls draws, keyed by (kind, content, occurrence)."""
    waited: dict[tuple[str, str, int], float] = {}
    real_delay = env.model.delay

    def spy(kind, content, occurrence):
        value = real_delay(kind, content, occurrence)
        waited[kind, content, occurrence] = value
        return value

    env.model.delay = spy  # type: ignore[method-assign]
    return waited


async def _delays(env: LatencyEnvironment, calls: list[tuple[str, str]], *,
                  concurrent: bool) -> dict[tuple[str, str, int], float]:
    """The delay each call waited, keyed by (kind, content, occurrence)."""
    waited = _watch_delays(env)

    async def one(kind: str, item: str) -> None:
        if kind == "search":
            await env.search([item])
        else:
            await env.browse("q?", [item])

    if concurrent:
        await asyncio.gather(*(one(k, i) for k, i in calls))
    else:
        for k, i in calls:
            await one(k, i)
    return waited


async def test_the_same_calls_wait_the_same_delays_in_any_order_and_concurrency() -> None:
    config = _lognormal(median_s=0.002, p99_s=0.01, seed=3)
    calls = [("search", f"query {i % 7}") for i in range(20)] + [("browse", f"https://w/{i % 5}") for i in range(12)]
    sequential = await _delays(LatencyEnvironment(InstantEnvironment(), config), calls, concurrent=False)
    shuffled = calls[:]
    random.Random(1).shuffle(shuffled)
    concurrent = await _delays(LatencyEnvironment(InstantEnvironment(), config), shuffled, concurrent=True)
    assert concurrent == sequential
    assert len(set(sequential.values())) == len(sequential)  # repeats of a call are fresh draws, not copies
    other_seed = await _delays(LatencyEnvironment(InstantEnvironment(), _lognormal(median_s=0.002, p99_s=0.01, seed=4)),
                               calls, concurrent=False)
    assert other_seed.keys() == sequential.keys() and other_seed != sequential


def test_lognormal_draws_have_the_configured_median_and_p99() -> None:
    model = DelayModel(_lognormal(median_s=1.0, p99_s=15.0, browse_scale=3.0))
    n = 40_000
    search = sorted(model.delay("search", f"q{i}", 0) for i in range(n))
    assert search[n // 2] == pytest.approx(1.0, rel=0.05)
    assert search[int(n * 0.99)] == pytest.approx(15.0, rel=0.1)
    assert search[0] > 0
    browse = sorted(model.delay("browse", f"q{i}", 0) for i in range(n))
    assert browse[n // 2] == pytest.approx(3.0, rel=0.05)
    same = DelayModel(_lognormal(median_s=2.0, p99_s=2.0))
    assert {same.delay("search", f"q{i}", 0) for i in range(100)} == {2.0}  # p99 = median: no spread


async def test_concurrent_calls_overlap_their_delays() -> None:
    """Eight calls of ~0.2 s each, together: the batch takes about the longest delay, not their sum."""
    env = LatencyEnvironment(InstantEnvironment(), _lognormal(median_s=0.2, p99_s=0.25))
    waited = _watch_delays(env)
    started = time.perf_counter()
    await asyncio.gather(*(env.search([f"query {i}"]) for i in range(8)))
    elapsed = time.perf_counter() - started
    summary = env.summary()
    assert summary["search_calls"] == len(waited) == 8 and summary["browse_calls"] == 0
    assert summary["search_slept_s"] == pytest.approx(sum(waited.values())) and summary["search_slept_s"] > 1.4
    assert max(waited.values()) <= elapsed < summary["search_slept_s"] / 2


async def test_replay_draws_only_recorded_latencies_of_the_calls_kind(tmp_path: Path) -> None:
    recorded = tmp_path / "latencies.jsonl"
    recorded.write_text('{"kind": "search", "seconds": 0.001}\n{"kind": "search", "seconds": 0.003}\n\n'
                        '{"kind": "browse", "seconds": 0.002}\n')
    model = DelayModel(LatencyConfig(distribution="replay", replay_file=recorded))
    searches = {model.delay("search", f"q{i}", 0) for i in range(200)}
    assert searches == {0.001, 0.003}
    assert {model.delay("browse", f"u{i}", 0) for i in range(50)} == {0.002}
    numbers = tmp_path / "numbers.txt"
    numbers.write_text("0.5\n1.5\n")
    model = DelayModel(LatencyConfig(distribution="replay", replay_file=numbers))
    assert {model.delay("browse", f"u{i}", 0) for i in range(100)} == {0.5, 1.5}  # no kind: any call draws them


async def test_recorded_latencies_replay(tmp_path: Path) -> None:
    """Record a slow environment's own wall times (no simulated delay), then replay them over a fast one."""
    record = tmp_path / "runs" / "latencies.jsonl"
    async with LatencyEnvironment(InstantEnvironment(seconds=0.02), LatencyConfig(record_file=record)) as env:
        started = time.perf_counter()
        await env.search(["a", "b"])
        await env.browse("q?", ["https://w/1"])
        elapsed = time.perf_counter() - started
        assert env.summary()["search_slept_s"] == 0.0  # distribution none: nothing added, only recorded
    lines = [orjson.loads(line) for line in record.read_text().splitlines()]
    assert [line["kind"] for line in lines] == ["search", "browse"]
    assert all(0.019 <= line["seconds"] <= elapsed for line in lines)  # the inner sleep of 0.02 s, as measured
    assert read_latencies(record) == {"search": [lines[0]["seconds"]], "browse": [lines[1]["seconds"]]}

    replay = LatencyEnvironment(InstantEnvironment(), LatencyConfig(distribution="replay", replay_file=record))
    await replay.search(["c"])
    await replay.browse("q?", ["https://w/2"])
    assert replay.slept_s == {"search": lines[0]["seconds"], "browse": lines[1]["seconds"]}


@pytest.mark.parametrize(("overrides", "says"), [
    (["env.latency.distribution=lognormal", "env.latency.median_s=2", "env.latency.p99_s=1"], "p99_s >= median_s"),
    (["env.latency.distribution=lognormal", "env.latency.median_s=0"], "env.latency.median_s"),
    (["env.latency.distribution=replay"], "needs env.latency.replay_file"),
    (["env.latency.distribution=gamma"], "env.latency.distribution"),
])
def test_bad_latency_settings_say_what_to_fix(overrides: list[str], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        load_config(overrides=overrides)


@pytest.mark.parametrize(("text", "says"), [
    ("", "holds no latencies"),
    ("fast\n", ":1: expected a number of seconds"),
    ('1.0\n{"kind": "fetch", "seconds": 1}\n', ":2: kind must be search or browse"),
    ("-1\n", ":1: kind must be search or browse and seconds a finite number >= 0"),
])
def test_a_bad_replay_file_names_its_line(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "latencies.txt"
    path.write_text(text)
    with pytest.raises(ConfigError, match=says):
        read_latencies(path)
    with pytest.raises(ConfigError, match="does not exist"):
        read_latencies(tmp_path / "missing.jsonl")


async def test_remote_environments_are_slowed_on_the_client_side(world_config) -> None:
    world_config.env.server_urls = ["http://127.0.0.1:9"]
    world_config.env.latency = _lognormal(median_s=0.01, p99_s=0.05)
    env = make_environment(world_config)
    try:
        assert isinstance(env, LatencyEnvironment) and isinstance(env.inner, RemoteEnvironment)
        assert isinstance(env, Environment)
    finally:
        await env.aclose()


async def test_an_episode_through_a_slow_in_process_environment(world_config, small_world) -> None:
    """``make_environment`` wraps the real in-process environment; the oracle still answers through it, and
    every tool call it made waited its delay."""
    world_config.env.latency = _lognormal(median_s=0.01, p99_s=0.05, seed=1)
    task = next(t for t in load_tasks(small_world, "test") if t.type == "hop2")
    async with make_environment(world_config) as env:
        assert isinstance(env, LatencyEnvironment) and isinstance(env.inner, WebEnvironment)
        episode = await OracleResearcher(ToolBox(env, world_config)).run(task)
        summary = env.summary()
    assert episode.answer.lower() in (g.lower() for g in task.golds)
    tool_calls = sum(turn.assistant.count("<tool_call>") for turn in episode.turns)
    assert summary["search_calls"] + summary["browse_calls"] == tool_calls > 0
    assert summary["search_slept_s"] > 0 and summary["browse_slept_s"] > 0
    world_config.env.latency = LatencyConfig()
    plain = make_environment(world_config)
    try:
        assert isinstance(plain, WebEnvironment)  # no latency: no wrapper
    finally:
        await plain.aclose()
