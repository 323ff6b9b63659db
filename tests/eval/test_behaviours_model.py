"""No behaviour rate is stuck on a trained model's own episodes either.

``test_behaviours_real.py`` runs scripted researchers through the real tools; this file reads what a model did.
The episodes are a sample of a real quickstart run's held-out evaluation, after SFT and after GRPO, each with its
task as the world states it (``quickstart_episodes.jsonl.gz``, written by ``scripts/episodes_fixture.py``: 12 of
each task type per stage, drawn with seed 0, and all 140 conflict tasks per stage). Provenance: a fresh clone's ``bash scripts/setup.sh &&
.venv/bin/deepresearcher quickstart`` (world generator v4, seed 0) on the project's 2-core CPU VM, 2026-12-06.
When a measure's definition changes, these tests read the same episodes with the new definition; the fixture
changes only with the world's generator (regenerate it with the script after a quickstart).
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import orjson
import pytest

from deepresearcher.agent.trajectory import Trajectory, TurnRecord
from deepresearcher.eval.behaviours import MEANS, behaviour_rates, behaviour_record, stuck_rates

FIXTURE = Path(__file__).with_name("quickstart_episodes.jsonl.gz")

NO_CASE_OR_ONE_SIDE = {
    "episodes": "a count",
    "plan_chained": "real questions only (test_behaviours_real.py reads it both ways)",
    "judge_agreement": "needs a judge's labels (test_runner.py)",
    "first_value_stated": "the quickstart's last turn states the answer alone (docs/eval.md): no case",
    "second_value_stated": "the same",
    "conflict_saw_both": "with two hits a query, a conflict's reliable and contradicting pages are the first two hits "
                         "of its fact's query (tests/world), so every episode that searched it saw both: the model "
                         "always does; the no-tools guess and the garbled searches of test_behaviours_real.py do not",
}
"""The rates a model's episodes cannot read both ways here, each with why (docs/eval.md, "What each measure cannot
see"); every other rate must."""


def _episodes() -> list[dict[str, Any]]:
    lines = gzip.decompress(FIXTURE.read_bytes()).splitlines()
    return [orjson.loads(line) for line in lines if line.strip()]


def _trajectory(episode: dict[str, Any]) -> Trajectory:
    return Trajectory(task_id=episode["task"]["id"], question=episode["question"], answer=episode["answer"],
                      termination=episode["termination"],
                      turns=[TurnRecord.model_validate(turn) for turn in episode["turns"]])


@pytest.fixture(scope="module")
def records() -> dict[str, list[tuple[Any, dict[str, Any]]]]:
    """Each stage's behaviour records, beside their episodes."""
    out: dict[str, list[tuple[Any, dict[str, Any]]]] = {}
    for episode in _episodes():
        out.setdefault(episode["stage"], []).append((behaviour_record(_trajectory(episode), episode["task"]), episode))
    return out


def test_the_fixture_holds_both_stages_of_every_task_type(records) -> None:
    assert set(records) == {"after SFT", "after GRPO"}
    for pairs in records.values():
        types = [episode["task"]["type"] for _, episode in pairs]
        assert len(set(types)) == 7
        assert all(types.count(kind) == (140 if kind == "conflict" else 12) for kind in set(types))


def test_every_rate_is_true_for_some_model_episodes_and_false_for_others(records) -> None:
    rates = behaviour_rates(record for pairs in records.values() for record, _ in pairs)
    for name, value in rates.items():
        if name in NO_CASE_OR_ONE_SIDE:
            continue
        assert value["n"] >= 3, (name, value)
        if name not in MEANS:
            assert 0 < value["rate"] < 1, (name, value)


def test_the_stuck_flag_on_the_models_two_stages_names_only_the_one_sided_rate(records) -> None:
    """The report's flag (``stuck_rates``) on the model's two evaluations alone: of the rates with 20 cases, only
    the one a searching agent cannot fail reads the same on both (the report clears it with the no-tools guess)."""
    sources = {stage: behaviour_rates(record for record, _ in pairs) for stage, pairs in records.items()}
    assert stuck_rates(sources, min_cases=20) == {"conflict_saw_both": "100%"}


READ_BY_HAND: dict[tuple[str, str], dict[str, Any]] = {
    # (stage, task id): the measures a reader gives the episode, read in the fixture.
    # Read Fiapem Institute's 1932 and Cobrim Works' 1891, asked which was founded earlier, named Fiapem.
    ("after GRPO", "w16sn7-dev-00134"): {"grounded": False, "entities_searched": 2, "entities_read": 2,
                                         "correct": False},
    # Read Maipour's 1903 and Dubaex's 1870, asked which was founded later, named Maipour.
    ("after GRPO", "w22sn7-train-01080"): {"grounded": True, "entities_searched": 2, "entities_read": 2,
                                           "correct": True},
    # Searched one organization, then a person's birth year (no evidence of the task), and answered that year.
    ("after GRPO", "w22sn7-train-00038"): {"grounded": False, "entities_searched": 1, "entities_read": 1,
                                           "reaction": "answered"},
    # A forum (1876) ranked first; read both, wrote "wikiverse.org is reliable: 1874", answered 1876: the
    # contradicting page's value, which a page read states.
    ("after GRPO", "w22sn7-dev-00160"): {"grounded": True, "believed": "contradicting", "read_reliable": True,
                                         "read_contradicting": True, "unreliable_first": True, "cross_checked": True},
    # A fact site (1917) ranked first; read both, answered 1916: no page's value.
    ("after GRPO", "w20sn7-train-01900"): {"grounded": False, "believed": "other", "read_reliable": True,
                                           "read_contradicting": True, "unreliable_first": True,
                                           "cross_checked": True},
    # The reliable page ranked first; the forum URL it browsed was misspelt (an error, not a read); then it
    # searched the film's director and answered his birth year, 1941, for the film's release year.
    ("after GRPO", "w16sn7-train-01947"): {"grounded": False, "believed": "other", "read_reliable": True,
                                           "read_contradicting": False, "unreliable_first": False,
                                           "reaction": "answered"},
    # Unanswerable: "cannot find".
    ("after SFT", "w20sn7-train-00309"): {"abstained": True, "grounded": None},
    # Unanswerable: answered 1985, a year no page states for it.
    ("after SFT", "w16sn7-train-00947"): {"abstained": False, "grounded": False},
}


def test_episodes_read_by_hand_give_the_measures_a_reader_gives(records) -> None:
    """The definitions against a person's reading of eight of the model's episodes, both ways for each measure."""
    found = {(episode["stage"], episode["task"]["id"]): record
             for pairs in records.values() for record, episode in pairs}
    for key, expected in READ_BY_HAND.items():
        record = found[key].to_dict()
        assert {name: record[name] for name in expected} == expected, key


def test_grounded_answers_are_the_right_ones(records) -> None:
    """An answer a read page states (or, for a comparison, that the values read give) scores far above one that
    no page gave: what grounding must mean if it is to tell reading from guessing."""
    f1 = {True: [], False: []}
    for record, episode in (pair for pairs in records.values() for pair in pairs):
        if record.grounded is not None and episode["task"]["type"] != "conflict":
            f1[record.grounded].append(episode["f1"])
    assert min(len(f1[True]), len(f1[False])) >= 10, {k: len(v) for k, v in f1.items()}
    assert sum(f1[True]) / len(f1[True]) - sum(f1[False]) / len(f1[False]) > 0.5


def test_conflict_beliefs_match_the_answers_scores(records) -> None:
    """On a conflict, believing the reliable page is answering its value (the gold's words, F1 above 0), believing
    the contradicting one is not answering it (F1 under 1); both happen in the model's episodes."""
    beliefs = []
    for record, episode in (pair for pairs in records.values() for pair in pairs):
        beliefs.append(record.believed)
        if record.believed == "reliable":
            assert episode["f1"] > 0, episode["task"]["id"]
        elif record.believed == "contradicting":
            assert episode["f1"] < 1, episode["task"]["id"]
    assert {"reliable", "contradicting"} <= set(beliefs)
