"""The synthetic web: deterministic, typed tasks with real evidence, conflicts and hidden facts."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson
import pytest

from deepresearcher.web.html import html_to_text
from deepresearcher.world import (
    GENERATOR_VERSION,
    TASK_TYPES,
    UNANSWERABLE_ANSWER,
    build_world,
    iter_pages,
    load_manifest,
    load_tasks,
)
from deepresearcher.world.pages import RELIABLE_HOSTS, UNRELIABLE_HOSTS, is_unreliable, site_of
from deepresearcher.world.tasks import Task, comparison_winner


def _all_tasks(world: Path):
    return [t for split in ("train", "dev", "test") for t in load_tasks(world, split)]


@pytest.fixture(scope="module")
def page_texts(small_world: Path) -> dict[str, str]:
    """Clean text of every page of the small world, by URL (extracted once for the module)."""
    return {p["url"]: html_to_text(p["html"]) for p in iter_pages(small_world)}


def test_same_seed_gives_byte_identical_files_across_processes(tmp_path: Path) -> None:
    """Two processes with different hash seeds write the same bytes; another seed writes other bytes."""
    script = "import sys; from deepresearcher.world import build_world; build_world(3, 'tiny', sys.argv[1])"
    for name, hash_seed in (("a", "1"), ("b", "2")):
        subprocess.run([sys.executable, "-c", script, str(tmp_path / name)], check=True,
                       env={"PYTHONHASHSEED": hash_seed, "PATH": "/usr/bin:/bin"})
    files = ["pages.jsonl", "knowledge.jsonl", "manifest.json", "tasks/train.jsonl", "tasks/test.jsonl"]
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    build_world(4, "tiny", tmp_path / "c")
    assert (tmp_path / "c" / "pages.jsonl").read_bytes() != (tmp_path / "a" / "pages.jsonl").read_bytes()


def test_every_task_type_is_generated_and_split(small_world: Path) -> None:
    manifest = load_manifest(small_world)
    for split in ("train", "dev", "test"):
        assert set(manifest["tasks"][split]) == set(TASK_TYPES), split
    tasks = _all_tasks(small_world)
    assert len({t.id for t in tasks}) == len(tasks)
    assert len({t.question for t in tasks}) == len(tasks), "a question must not repeat across splits"


def test_answerable_tasks_cite_pages_that_state_the_answer(small_world: Path, page_texts: dict[str, str]) -> None:
    pages = page_texts
    for task in _all_tasks(small_world):
        if not task.answerable:
            continue
        assert task.evidence_urls and all(u in pages for u in task.evidence_urls), task.id
        last = task.chain[-1]
        if task.type in ("hop1", "hop2", "hop3", "conflict"):
            stated = {last.value, f"{int(last.value):,}"} if last.value.isdigit() else {last.value}
            assert any(any(s in pages[u] for s in stated) for u in last.evidence_urls), task.id


def test_conflicting_sources_lose_to_the_reliable_majority(small_world: Path, page_texts: dict[str, str]) -> None:
    """Each conflict's wrong value is on one unreliable page (a blog, the forum or the trivia site), recorded in
    its hop; the true value on two or more reliable sites' pages."""
    facts = {(f["subject"], f["relation"]): f for f in map(orjson.loads, (small_world / "knowledge.jsonl").open("rb"))}
    pages = page_texts
    conflicts = [t for t in _all_tasks(small_world) if t.type == "conflict"]
    assert conflicts
    for task in conflicts:
        hop = task.chain[0]
        fact = facts[(hop.subject, hop.relation)]
        assert fact["wrong_value"] and fact["wrong_value"] != fact["value"] and hop.contradicting_value == fact["wrong_value"]
        assert len(task.evidence_urls) >= 2, "the true value needs a majority of reliable pages"
        assert not any(is_unreliable(u) for u in task.evidence_urls)
        assert len(hop.contradicting_urls) == 1 and is_unreliable(hop.contradicting_urls[0])
        assert fact["wrong_value"] in pages[hop.contradicting_urls[0]].replace(",", "")
    assert {site_of(t.chain[0].contradicting_urls[0]) for t in conflicts} == set(UNRELIABLE_HOSTS)


def test_the_unreliable_page_outranks_the_reliable_one_in_about_half_the_conflicts(small_world: Path) -> None:
    """With the real index (the `local` backend), each conflict's natural query puts a reliable page and the
    contradicting one in its first two hits, the contradicting one first in about half of them."""
    from deepresearcher.web.backends.local import LocalIndex

    index = LocalIndex(small_world / "index", snippet_chars=40)
    conflicts = [t for t in _all_tasks(small_world) if t.type == "conflict"]
    first = 0
    for task in conflicts:
        hop = task.chain[0]
        top = [hit.url for hit in index.search(hop.query, 2)]
        assert set(top) & set(hop.evidence_urls) and hop.contradicting_urls[0] in top, (hop.query, top)
        first += top[0] == hop.contradicting_urls[0]
    assert 0.35 <= first / len(conflicts) <= 0.65, (first, len(conflicts))
    reliable = [u for t in conflicts for u in t.chain[0].evidence_urls]
    assert all(site_of(u) in RELIABLE_HOSTS for u in reliable)


def test_world_show_reports_how_often_the_contradicting_page_ranks_first(small_world: Path) -> None:
    """`deepresearcher world show` prints the conflicts' ranking (the figure docs/ARCHITECTURE.md quotes), the
    counts the index gives for the world's own conflict hops."""
    from typer.testing import CliRunner

    from deepresearcher.cli.main import app
    from deepresearcher.web.backends.local import LocalIndex

    index = LocalIndex(small_world / "index")
    hops = [t.chain[0] for t in _all_tasks(small_world) if t.type == "conflict"]
    first = sum(index.search(h.query, 1)[0].url == h.contradicting_urls[0] for h in hops)
    shown = CliRunner().invoke(app, ["world", "show", str(small_world)], env={"COLUMNS": "300"})
    assert shown.exit_code == 0, shown.output
    assert (f"conflict tasks: {len(hops)}; for the fact's query the contradicting page ranks first in {first} "
            f"({first / len(hops):.1%}); a reliable and the contradicting page are the top 2 in {len(hops)}") in shown.output


def test_unanswerable_tasks_ask_for_facts_that_no_page_states(small_world: Path, page_texts: dict[str, str]) -> None:
    facts = {(f["subject"], f["relation"]): f for f in map(orjson.loads, (small_world / "knowledge.jsonl").open("rb"))}
    texts = list(page_texts.values())
    tasks = [t for t in _all_tasks(small_world) if t.type == "unanswerable"]
    assert tasks
    for task in tasks:
        assert task.golds == [UNANSWERABLE_ANSWER] and not task.answerable
        fact = facts[(task.chain[0].subject, task.chain[0].relation)]
        assert fact["hidden"]
        about = [t for t in texts if task.chain[0].subject in t]
        assert about, "the subject itself is on the web"
        assert not any(f"{task.chain[0].subject} (born {fact['value']})" in t for t in about)
        assert not any(f"birth is {fact['value']}" in t or f"established in {fact['value']}" in t for t in about)


def test_pages_carry_boilerplate_that_extraction_removes(small_world: Path) -> None:
    page = next(iter_pages(small_world))
    assert "cookie" in page["html"].lower() and "<nav" in page["html"] and "<footer" in page["html"]
    text = html_to_text(page["html"])
    assert page["title"] in text
    assert "cookie" not in text.lower() and "All rights reserved" not in text


def test_pages_come_in_several_layouts(small_world: Path) -> None:
    layouts = Counter(p["layout"] for p in iter_pages(small_world))
    assert set(layouts) == {"encyclopedia", "list", "directory", "catalogue", "news", "blog", "forum", "trivia"}


def test_worlds_sharing_a_name_pool_differ_in_facts(tmp_path: Path) -> None:
    """Same names_seed, different seeds: identical entity names, mostly different facts."""
    build_world(1, "tiny", tmp_path / "a", names_seed=9)
    build_world(2, "tiny", tmp_path / "b", names_seed=9)
    facts = [{(f["subject"], f["relation"]): f["value"] for f in map(orjson.loads, (tmp_path / w / "knowledge.jsonl").open("rb"))}
             for w in ("a", "b")]
    assert facts[0].keys() == facts[1].keys()
    changed = sum(facts[0][k] != facts[1][k] for k in facts[0])
    assert changed > 0.5 * len(facts[0])
    assert load_manifest(tmp_path / "a")["names_seed"] == 9


def test_fewer_background_sentences_shorten_articles_and_change_nothing_else(tmp_path: Path) -> None:
    """background_sentences=0 drops the prose before the infobox; every task and every other page is unchanged."""
    build_world(3, "tiny", tmp_path / "bg2")
    manifest = build_world(3, "tiny", tmp_path / "bg0", background_sentences=0)
    assert manifest["background_sentences"] == 0
    for split in ("train", "dev", "test"):
        assert (tmp_path / "bg2" / "tasks" / f"{split}.jsonl").read_bytes() == \
            (tmp_path / "bg0" / "tasks" / f"{split}.jsonl").read_bytes()
    full = {p["url"]: p for p in iter_pages(tmp_path / "bg2")}
    short = {p["url"]: p for p in iter_pages(tmp_path / "bg0")}
    assert full.keys() == short.keys()
    articles = [u for u, p in full.items() if p["layout"] == "encyclopedia"]
    assert articles
    for url in articles:
        before, after = html_to_text(full[url]["html"]), html_to_text(short[url]["html"])
        assert len(after) < len(before)
        assert "archival material" not in after and "volunteer editors" not in after and "documentaries" not in after
        assert after.index("Overview") < 200, "the infobox follows the lead directly"
    assert all(full[u] == short[u] for u in full if u not in articles)


def test_guessing_does_not_pay(small_world: Path) -> None:
    """Yes/no and comparison winners are 50/50, and no answer is over 5% of its type and relation."""
    tasks = _all_tasks(small_world)
    for split in ("train", "dev", "test"):  # balanced in every split, so no split rewards a guess
        in_split = load_tasks(small_world, split)
        yes_no = Counter(t.golds[0] for t in in_split if t.type == "two_page")
        assert set(yes_no) == {"yes", "no"} and abs(yes_no["yes"] - yes_no["no"]) <= 1, (split, yes_no)
        comparisons = [t for t in in_split if t.type == "comparison"]
        first = sum(t.golds[0] == t.chain[0].subject for t in comparisons)
        assert abs(2 * first - len(comparisons)) <= 4, (split, first, len(comparisons))
    assert len({t.type for t in load_tasks(small_world, "test")[:40]}) >= 4, "a prefix of a split mixes the types"
    comparisons = [t for t in tasks if t.type == "comparison"]
    by_template: dict[str, Counter[bool]] = {}
    for t in comparisons:  # neither the wording nor the order gives the answer away
        frame = t.question.replace(t.chain[0].subject, "A").replace(t.chain[1].subject, "B")
        by_template.setdefault(frame, Counter())[t.golds[0] == t.chain[0].subject] += 1
    assert len(by_template) == 8 and all(abs(c[True] - c[False]) <= 1 for c in by_template.values()), by_template
    assert {"earlier", "later", "larger", "smaller"} <= {w.strip(",") for t in comparisons for w in t.question.split()}
    groups: dict[tuple[str, str], Counter[str]] = {}
    for task in tasks:
        if task.type in ("hop1", "hop2", "hop3", "conflict"):
            groups.setdefault((task.type, task.chain[-1].relation), Counter())[task.golds[0]] += 1
    for key, answers in groups.items():
        if answers.total() >= 40:
            assert max(answers.values()) <= 0.05 * answers.total(), (key, answers.most_common(2), answers.total())
    for relation in ("birth_year", "founded_year", "release_year"):  # no cap piles years on one value
        years = Counter(t.golds[0] for t in tasks if t.type in ("hop1", "hop2", "hop3", "conflict")
                        and t.chain[-1].relation == relation)
        assert max(years.values()) <= 0.05 * years.total(), (relation, years.most_common(3))


def test_comparison_winner_reads_the_question_of_either_generator_version() -> None:
    assert comparison_winner("Who was born later, Ann or Bo?", [1901, 1950]) == 1
    assert comparison_winner("Which city has the larger population, X or Y?", [5, 3]) == 0  # as worlds v1 ask it
    assert comparison_winner("Which city has the smaller population, X or Y?", [5, 3]) == 1
    with pytest.raises(ValueError, match="not a comparison"):
        comparison_winner("Who is taller, X or Y?", [1, 2])


def test_default_world_cache_folder_changes_with_the_generator_version(monkeypatch: pytest.MonkeyPatch) -> None:
    from deepresearcher.config import load_config
    from deepresearcher.web import local_world

    config = load_config(overrides=["world.size=small"])
    now = local_world.world_dir(config)
    assert now.name.endswith(f"-v{GENERATOR_VERSION}") and GENERATOR_VERSION >= 2
    monkeypatch.setattr(local_world, "GENERATOR_VERSION", 1)
    assert local_world.world_dir(config) != now, "a cached world of the old generator must not be reused"


def test_tasks_of_worlds_built_before_version_3_still_load() -> None:
    """Worlds written before tasks named their golds ``golds`` (``answers``) load into the same task."""
    task = Task("w-1", "hop1", "Where was X born?", ["Vesk"], True, ["https://w/x"])
    old = {("answers" if key == "golds" else key): value for key, value in task.to_dict().items()}
    assert "golds" in task.to_dict() and Task.from_dict(old) == task == Task.from_dict(task.to_dict())
