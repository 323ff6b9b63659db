"""No behaviour rate is stuck: on real episodes of a small run, every measure is true for some and false for others.

The episodes are real: researchers run against the small world's own index and pages with the quickstart's
search settings (two hits a query, two pages a call, 40-character snippets; the extractive reader),
and the measures read their trajectories as they read a model's. The researchers are the three the quickstart
reports beside the model (the oracle, the first-hit baseline, the best no-tools guess) and a few scripted
habits a model shows (answering from snippets, a search with a garbled name and what follows it, reading both
pages of a comparison and naming the first, trusting the first of two pages read). Hand-built trajectories for
each definition, both ways, are in ``test_behaviours.py``.
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from deepresearcher.agent.tools import ToolBox, ToolContext
from deepresearcher.agent.trajectory import Trajectory
from deepresearcher.config import load_config
from deepresearcher.eval.baselines import GuessTask, fit_baselines
from deepresearcher.eval.behaviours import MEANS, behaviour_rates, behaviour_record
from deepresearcher.eval.scripted import (
    FirstHitResearcher,
    ScriptedEpisode,
    ScriptedTurn,
    scripted_trajectories,
)
from deepresearcher.train.oracle import OracleResearcher
from deepresearcher.web.environment import WebEnvironment
from deepresearcher.world import Task, load_tasks
from deepresearcher.world.knowledge import RELATIONS
from deepresearcher.world.reading import extract_value

QUICKSTART_TOOLS = ["search.top_k=2", "search.snippet_chars=40", "search.max_queries=1", "browse.max_urls=2",
                    "browse.observation_format=compact"]
"""The quickstart recipe's search settings (recipes/quickstart.yaml); pages are read whole enough for the session's
small world, whose articles keep their background prose (the quickstart's have none, and read 400 characters)."""


def _call(name: str, arguments: dict) -> str:
    import orjson

    return "<tool_call>" + orjson.dumps({"name": name, "arguments": arguments}).decode() + "</tool_call>"


class Garbled:
    """Searches the first hop with the subject's name garbled (no hit is evidence), then: searches the natural query
    and answers from its first hit (``new``), searches the garbled name again and abstains (``same``), or answers a
    guess right away (``answer``)."""

    def __init__(self, toolbox: Any, mode: str) -> None:
        self.toolbox, self.mode = toolbox, mode

    async def search(self, query: str, context: ToolContext, episode: ScriptedEpisode) -> list[dict]:
        outcome = await self.toolbox.call("web_search", {"query": [query]}, context)
        episode.turns.append(ScriptedTurn("<think>Searching.</think>\n" + _call("web_search", {"query": [query]}),
                                          outcome.text))
        return [h for r in outcome.raw or [] for h in r.get("web_page_info_list", [])]

    async def run(self, task: Task) -> ScriptedEpisode:
        episode, context, hop = ScriptedEpisode(task.id, ""), ToolContext(task.question), task.chain[0]
        garbled = "".join(reversed(hop.subject.lower())) + "qz"
        await self.search(garbled, context, episode)
        answer = "1900"
        if self.mode == "new":
            hits = await self.search(hop.query, context, episode)
            answer = "cannot find"
            if hits:
                urls = [hits[0]["url"]]
                outcome = await self.toolbox.call("browse_webpage", {"url_list": urls}, context)
                episode.turns.append(ScriptedTurn("<think>Reading.</think>\n" + _call("browse_webpage", {"url_list": urls}),
                                                  outcome.text))
                pages = [p for p in outcome.raw or [] if "information" in p]
                if pages and (value := extract_value(hop.relation, hop.subject, pages[0]["information"])):
                    answer = value
        elif self.mode == "same":
            await self.search(garbled, context, episode)
            answer = "cannot find"
        episode.answer = answer
        episode.turns.append(ScriptedTurn(f"<think>So.</think>\n<answer>{answer}</answer>"))
        return episode


class ReadsBothNamesTheFirst:
    """A comparison or yes/no task: searches and reads both entities' first hits, writes one entity's value in its
    last thought (the first's or the second's, by the task id's last digit), and answers the first name (or "yes"):
    reading without comparing."""

    def __init__(self, toolbox: Any) -> None:
        self.toolbox = toolbox

    async def run(self, task: Task) -> ScriptedEpisode:
        episode, context, values = ScriptedEpisode(task.id, ""), ToolContext(task.question), []
        for hop in task.chain:
            outcome = await self.toolbox.call("web_search", {"query": [hop.query]}, context)
            episode.turns.append(ScriptedTurn(_call("web_search", {"query": [hop.query]}), outcome.text))
            hits = [h for r in outcome.raw or [] for h in r.get("web_page_info_list", [])]
            urls = [hits[0]["url"]] if hits else []
            outcome = await self.toolbox.call("browse_webpage", {"url_list": urls}, context)
            episode.turns.append(ScriptedTurn(_call("browse_webpage", {"url_list": urls}), outcome.text))
            notes = " ".join(p.get("information", "") for p in outcome.raw or [] if isinstance(p, dict))
            values.append(extract_value(hop.relation, hop.subject, notes) or "")
        episode.answer = "yes" if task.type == "two_page" else task.chain[0].subject
        one = int(task.id[-1]) % 2
        episode.turns.append(ScriptedTurn(f"<think>{task.chain[one].subject} {values[one]}.</think>\n"
                                          f"<answer>{episode.answer}</answer>"))
        return episode


class ReadsTwoTrustsTheFirst(FirstHitResearcher):
    """Reads the first two hits of each search (one call) and answers the first page's value: sees a conflict,
    does not weigh it."""

    async def _lookup(self, subject: str, relation: str, context: ToolContext, episode: ScriptedEpisode) -> str | None:
        query = RELATIONS[relation].query.format(s=subject)
        outcome = await self.toolbox.call("web_search", {"query": [query]}, context)
        episode.turns.append(ScriptedTurn(_call("web_search", {"query": [query]}), outcome.text))
        urls = [h["url"] for r in outcome.raw or [] for h in r.get("web_page_info_list", [])][:2]
        if not urls:
            return None
        outcome = await self.toolbox.call("browse_webpage", {"url_list": urls}, context)
        episode.turns.append(ScriptedTurn(_call("browse_webpage", {"url_list": urls}), outcome.text))
        found = [extract_value(relation, subject, p["information"]) for p in outcome.raw or [] if "information" in p]
        return next((v for v in found if v), None)


def _sample(small_world: Path) -> list[Task]:
    """Twelve test tasks of each type, and every conflict of the world (few per split)."""
    rng = random.Random(0)
    tasks = load_tasks(small_world, "test")
    by_type: dict[str, list[Task]] = defaultdict(list)
    for task in tasks:
        by_type[task.type].append(task)
    picked = [t for kind in sorted(by_type) if kind != "conflict" for t in rng.sample(by_type[kind], min(12, len(by_type[kind])))]
    return picked + [t for split in ("train", "dev", "test") for t in load_tasks(small_world, split) if t.type == "conflict"]


@pytest.fixture(scope="module")
def episodes(small_world: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[Trajectory, dict]]]:
    """Each researcher's trajectories on the sample, with the task dict its behaviours are measured against."""
    config = load_config(overrides=[f"world.dir={small_world}", "world.size=small",
                                    f"cache_dir={tmp_path_factory.mktemp('cache')}", *QUICKSTART_TOOLS])
    tasks = _sample(small_world)
    two_entity = [t for t in tasks if t.type in ("comparison", "two_page")]
    chains = [t for t in tasks if t.type in ("hop1", "conflict", "unanswerable")]

    async def run() -> dict[str, list[tuple[Trajectory, dict]]]:
        async with WebEnvironment.from_config(config) as env:
            toolbox = ToolBox(env, config)

            async def of(make, group):
                return list(zip(await scripted_trajectories(make, group, lambda _: toolbox),
                                [t.to_dict() for t in group], strict=True))

            return {
                "oracle": await of(lambda b: OracleResearcher(b, terse=True), tasks),
                "oracle, values noted": await of(lambda b: OracleResearcher(b, terse=True, two_entity_order="noted"),
                                                 two_entity),
                "oracle, snippets only": await of(lambda b: OracleResearcher(b, use_browse=False, terse=True), tasks),
                "first hit": await of(FirstHitResearcher, tasks),
                "reads two, trusts the first": await of(ReadsTwoTrustsTheFirst, chains),
                "reads both, names the first": await of(ReadsBothNamesTheFirst, two_entity),
                **{f"garbled, {mode}": await of(lambda b, m=mode: Garbled(b, m), chains) for mode in ("new", "same", "answer")},
            }

    out = asyncio.run(run())
    fitted = fit_baselines([t.to_dict() for t in load_tasks(small_world, "train")])
    out["no tools"] = [(Trajectory(question=t.question, answer=fitted.answer("best", GuessTask.of(t))), t.to_dict())
                       for t in tasks]
    return out


def _records(episodes, *sources: str, labels=lambda task: task):
    names = sources or tuple(episodes)
    return [behaviour_record(trajectory, labels(task)) for name in names for trajectory, task in episodes[name]]


def test_every_world_rate_is_true_for_some_real_episodes_and_false_for_others(episodes) -> None:
    rates = behaviour_rates(_records(episodes))
    world_only = {"plan_chained", "judge_agreement", "episodes"}  # real questions; a judge (test_runner)
    for name, value in rates.items():
        if name in world_only:
            continue
        assert value["n"] >= 3, (name, value)
        if name in MEANS:
            continue
        assert 0 < value["rate"] < 1, (name, value)
    for name in MEANS:  # means: different values on different episodes
        per_episode = {r.to_dict()[{"pages_per_answer": "pages_read", "sites_per_answer": "sites_read",
                                    "repeated_calls": "repeated_calls"}[name]] for r in _records(episodes)}
        assert len(per_episode) >= 2, name


def test_chained_queries_are_true_for_some_real_episodes_and_false_for_others(episodes) -> None:
    """The real-question plan (no chain to follow): the oracle's episodes with their world labels taken away."""
    as_real = _records(episodes, "oracle", "first hit",
                       labels=lambda task: {"type": "real", "golds": task["golds"], "answerable": task["answerable"]})
    assert 0 < behaviour_rates(as_real)["plan_chained"]["rate"] < 1


def test_the_three_reference_researchers_read_as_the_world_implies(episodes) -> None:
    """The oracle reads both sources of a conflict and believes the reliable one; the first-hit baseline is misled
    whenever the unreliable page ranks first; guessing without tools grounds nothing."""
    oracle = behaviour_rates(_records(episodes, "oracle"))
    first = behaviour_rates(_records(episodes, "first hit"))
    guess = behaviour_rates(_records(episodes, "no tools"))
    assert oracle["conflict_read_both"]["rate"] == oracle["conflict_believed_reliable"]["rate"] == 1.0
    assert oracle["conflict_reliable_when_misled"]["rate"] == 1.0 and oracle["grounded"]["rate"] == 1.0
    assert first["conflict_read_both"]["rate"] == 0.0 and first["conflict_reliable_when_misled"]["rate"] == 0.0
    assert 0.3 <= first["conflict_believed_reliable"]["rate"] <= 0.7, first["conflict_believed_reliable"]
    assert first["cross_checked"]["rate"] == 0.0 and oracle["cross_checked"]["rate"] > 0
    assert guess["grounded"]["rate"] == 0.0 and guess["cross_checked"]["rate"] == 0.0
    assert guess["every_hop_searched"]["rate"] == 0.0 and oracle["every_hop_searched"]["rate"] > 0.9



def test_scripted_trajectories_score_as_a_models_do(episodes, small_world: Path) -> None:
    """The reward's scorer (format check included) reads a scripted trajectory as it reads a model's: the oracle
    answers every conflict right, the first-hit baseline about half of them."""
    from deepresearcher.reward import score_rollout

    def conflict_f1(name: str) -> float:
        scores = [score_rollout(t, task["golds"], answerable=task["answerable"]) for t, task in episodes[name]
                  if task["type"] == "conflict"]
        assert all(s.format_ok for s in scores)
        return sum(s.metrics["f1"] for s in scores) / len(scores)

    assert conflict_f1("oracle") == 1.0
    assert 0.3 <= conflict_f1("first hit") <= 0.7
