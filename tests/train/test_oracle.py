"""The oracle researcher proves the world is solvable with search, and that browsing matters.

It reads pages by the world's own label tables (``world.pages``), so relabelling a page changes what
the oracle looks for, with no copy of the labels to keep in step.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from deepresearcher.agent.tools import ToolBox
from deepresearcher.config import load_config
from deepresearcher.train.oracle import OracleResearcher, extract_value
from deepresearcher.web.environment import WebEnvironment
from deepresearcher.world import build_world, iter_pages, load_tasks, pages


def _correct(answer: str, golds: list[str]) -> bool:
    return answer.lower() in (g.lower() for g in golds)


async def _accuracy(world_config, tasks, use_browse: bool) -> dict[str, float]:
    by_type: dict[str, list[bool]] = defaultdict(list)
    async with WebEnvironment.from_config(world_config) as env:
        oracle = OracleResearcher(ToolBox(env, world_config), use_browse=use_browse)
        for task in tasks:
            by_type[task.type].append(_correct((await oracle.run(task)).answer, task.golds))
    return {kind: sum(v) / len(v) for kind, v in by_type.items()}


async def test_oracle_answers_answerable_tasks_through_the_tools(world_config, small_world) -> None:
    tasks = load_tasks(small_world, "test")
    answerable = [t for t in tasks if t.answerable]
    with_browse = await _accuracy(world_config, answerable, use_browse=True)
    overall = sum(with_browse[t.type] for t in answerable) / len(answerable)
    assert overall >= 0.95, with_browse
    search_only = await _accuracy(world_config, [t for t in answerable if t.type in ("hop2", "hop3")], use_browse=False)
    for kind in ("hop2", "hop3"):
        assert search_only[kind] <= with_browse[kind] / 2, (kind, search_only, with_browse)


async def test_oracle_says_it_cannot_find_hidden_facts(world_config, small_world) -> None:
    tasks = [t for split in ("train", "dev", "test") for t in load_tasks(small_world, split) if not t.answerable][:10]
    assert tasks
    assert (await _accuracy(world_config, tasks, use_browse=True))["unanswerable"] == 1.0


async def test_oracle_turns_are_in_the_policy_format(world_config, small_world) -> None:
    task = next(t for t in load_tasks(small_world, "test") if t.type == "hop2")
    async with WebEnvironment.from_config(world_config) as env:
        episode = await OracleResearcher(ToolBox(env, world_config)).run(task)
    assert [t.assistant.count("<tool_call>") for t in episode.turns] == [1, 1, 1, 1, 0]
    assert all(t.observation for t in episode.turns[:-1]) and episode.turns[-1].observation is None
    assert episode.turns[-1].assistant.endswith(f"<answer>{episode.answer}</answer>")


def test_value_extraction_reads_infoboxes_lists_and_sentences() -> None:
    assert extract_value("born_in", "Ana Bel", "| Place of birth | Velmora | \n") == "Velmora"
    assert extract_value("population", "Velmora", "| Velmora | 1,234,500 |") == "1234500"
    assert extract_value("birth_year", "Ana Bel", "- Ana Bel (born 1931)") == "1931"
    assert extract_value("born_in", "Ana Bel", "- Ana Bel (born 1931)", title="List of notable people from Oskar") == "Oskar"
    assert extract_value("founded_by", "Zeta Works", "nothing relevant here") is None


async def test_terse_oracle_writes_shorter_thoughts_and_still_answers(world_config, small_world) -> None:
    """The terse oracle (SFT data for from-scratch models) says less per turn but reaches the same answers."""
    tasks = [t for t in load_tasks(small_world, "test") if t.answerable][:20]
    async with WebEnvironment.from_config(world_config) as env:
        toolbox = ToolBox(env, world_config)
        full = [await OracleResearcher(toolbox).run(t) for t in tasks]
        terse = [await OracleResearcher(toolbox, terse=True).run(t) for t in tasks]
    assert [e.answer for e in terse] == [e.answer for e in full]
    for a, b in zip(full, terse):
        assert [t.observation for t in a.turns] == [t.observation for t in b.turns], "same tool calls, same results"
        assert sum(len(t.assistant) for t in b.turns) < sum(len(t.assistant) for t in a.turns)


def test_value_extraction_follows_the_world_label_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Change a label in the world's table and the oracle reads the new label, not the old one."""
    assert extract_value("born_in", "Ana Bel", "| Hometown | Velmora |") is None
    monkeypatch.setitem(pages.INFOBOX_LABELS, "born_in", "Hometown")
    monkeypatch.setitem(pages.LIST_ENTRIES, "birth_year", "{s}, born in {v}")
    monkeypatch.setitem(pages.LIST_TITLES, "born_in", "Born in {v}")
    assert extract_value("born_in", "Ana Bel", "| Hometown | Velmora |") == "Velmora"
    assert extract_value("born_in", "Ana Bel", "| Place of birth | Velmora |") is None
    assert extract_value("birth_year", "Ana Bel", "- Ana Bel, born in 1931") == "1931"
    assert extract_value("birth_year", "Ana Bel", "- Ana Bel (born 1931)") is None
    assert extract_value("born_in", "Ana Bel", "- Ana Bel", title="Born in Oskar") == "Oskar"
    assert extract_value("born_in", "Ana Bel", "- Ana Bel", title="Notable people from Oskar") is None


async def test_oracle_answers_a_world_rendered_with_other_labels(monkeypatch, tmp_path: Path) -> None:
    """A world rendered from a relabelled table is read through that table: every hop answered exactly as
    on the same world rendered with the usual labels.

    Reading the same pages with the original labels fails, so the answers come from the table.
    """
    from deepresearcher.web.backends.local_build import build_index

    def world(name: str) -> tuple[Any, list[Any]]:
        root = tmp_path / name
        build_world(3, "tiny", root)
        build_index(iter_pages(root), root / "index")
        config = load_config(overrides=[f"world.dir={root}", "world.size=tiny", f"cache_dir={tmp_path / 'cache'}"])
        train = load_tasks(root, "train")
        return config, [t for kind in ("hop1", "hop2", "hop3") for t in [t for t in train if t.type == kind][:20]]

    usual = await _accuracy(*world("usual"), use_browse=True)
    assert min(usual.values()) >= 0.9, usual
    original = dict(pages.INFOBOX_LABELS)
    monkeypatch.setattr(pages, "INFOBOX_LABELS", {relation: label.upper() for relation, label in original.items()})
    config, tasks = world("relabelled")
    assert any("<th>PLACE OF BIRTH</th>" in p["html"] for p in iter_pages(tmp_path / "relabelled"))
    relabelled = await _accuracy(config, tasks, use_browse=True)
    assert relabelled == usual, relabelled
    monkeypatch.setattr(pages, "INFOBOX_LABELS", original)
    stale = await _accuracy(config, tasks, use_browse=True)
    assert all(stale[kind] < 0.5 for kind in stale), stale


@pytest.mark.parametrize("order", ["interleaved", "searches_first", "noted"])
async def test_two_entity_orders_differ_only_in_turn_order_and_what_the_thoughts_state(
        world_config, small_world, order: str) -> None:
    task = next(t for t in load_tasks(small_world, "test") if t.type == "comparison")
    (a, b), (va, vb) = [h.subject for h in task.chain], [pages.number_text(str(h.value)) for h in task.chain]
    async with WebEnvironment.from_config(world_config) as env:
        episode = await OracleResearcher(ToolBox(env, world_config), terse=True, two_entity_order=order).run(task)
    tools = [t.assistant.split('"name":"')[1].split('"')[0] for t in episode.turns[:-1]]
    thoughts = [t.assistant.split("</think>")[0].removeprefix("<think>") for t in episode.turns]
    assert _correct(episode.answer, task.golds)
    if order == "interleaved":
        assert tools == ["web_search", "browse_webpage", "web_search", "browse_webpage"]
        assert thoughts[-1] == f"The sources give {episode.answer}."
        return
    assert tools == ["web_search", "web_search", "browse_webpage", "browse_webpage"]
    assert thoughts[-1] == f"{a} {va}, {b} {vb}."
    assert thoughts[3] == (f"{a} {va}. Reading it." if order == "noted" else "Reading it.")
