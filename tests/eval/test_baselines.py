"""No-tools baselines: fitted on training tasks only, they find the priors a policy could exploit, and
the balanced world leaves them little to find."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepresearcher.eval.baselines import GuessTask, fit_baselines, margin_rows
from deepresearcher.reward import answer_metrics
from deepresearcher.world import Hop, Task, load_tasks

# The stated ceiling: on the small world, guessing from the question's form (the best of the baselines
# per type, chosen on training tasks) scores at most this F1 on the held-out tasks.
SMALL_WORLD_CEILING = 0.10


def _task(i: int, kind: str, answer: str, relation: str = "born_in", names: tuple[str, ...] = ()) -> Task:
    chain = [Hop(n, relation, "", "", []) for n in names] or [Hop(f"S{i}", relation, answer, "", [])]
    return Task(f"{kind}-{i}", kind, f"q{i}?", [answer], kind != "unanswerable", [], chain)


def test_balanced_small_world_keeps_guessing_below_the_ceiling(small_world: Path) -> None:
    train = load_tasks(small_world, "train")
    held_out = load_tasks(small_world, "dev") + load_tasks(small_world, "test")
    report = fit_baselines(train).evaluate(held_out)
    assert report.f1["best"]["all"] <= SMALL_WORLD_CEILING, report.f1["best"]
    for kind in ("hop1", "hop2", "hop3", "conflict"):  # open answers: the prior is nearly worthless
        assert report.f1["best"][kind] <= 0.06, (kind, report.f1["best"])
    for kind in ("comparison", "two_page"):  # two choices: a guess is right about half the time, not more
        assert report.f1["best"][kind] <= 0.65, (kind, report.f1["best"])
    assert report.f1["best"]["unanswerable"] == 1.0, "saying 'cannot find' is the right guess there"


def test_type_prior_learns_a_skewed_yes_no_split_from_training_tasks_only() -> None:
    train = [_task(i, "two_page", "no" if i % 5 else "yes") for i in range(100)]  # 80% "no"
    evaluated = [_task(100 + i, "two_page", "no" if i % 5 else "yes") for i in range(50)]
    baselines = fit_baselines(train)
    report = baselines.evaluate(evaluated)
    assert baselines.guesses["type_prior"]["two_page"].answer == "no"
    assert report.f1["type_prior"]["two_page"] == pytest.approx(0.8)
    assert report.f1["cannot_find"]["two_page"] == 0.0
    flipped = fit_baselines(train).evaluate([_task(200 + i, "two_page", "yes") for i in range(10)])
    assert flipped.f1["best"]["all"] == 0.0, "the guess comes from training, never from the evaluated golds"


def test_relation_prior_finds_each_relations_most_common_answer() -> None:
    train = [_task(i, "hop1", "Avora", "country") for i in range(30)] + \
            [_task(30 + i, "hop1", "poet", "occupation") for i in range(30)] + \
            [_task(60 + i, "hop1", f"city{i}", "born_in") for i in range(40)]
    evaluated = [_task(200, "hop1", "Avora", "country"), _task(201, "hop1", "poet", "occupation"),
                 _task(202, "hop1", "elsewhere", "born_in")]
    baselines = fit_baselines(train)
    report = baselines.evaluate(evaluated)
    assert report.f1["relation_prior"]["hop1"] == pytest.approx(2 / 3)
    assert report.f1["type_prior"]["hop1"] < report.f1["relation_prior"]["hop1"]
    assert baselines.choice["hop1"] == "relation_prior" and report.f1["best"]["hop1"] == pytest.approx(2 / 3)


def test_comparison_guess_can_be_a_position_and_a_common_token_earns_partial_credit() -> None:
    first_wins = [_task(i, "comparison", f"A{i} Guild", "founded_year", (f"A{i} Guild", f"B{i} Press")) for i in range(20)]
    report = fit_baselines(first_wins).evaluate(first_wins[:5])
    assert report.guesses["type_prior"]["comparison"] == "name #1"
    assert report.f1["type_prior"]["comparison"] == 1.0
    guilds = [_task(i, "hop1", f"Org{i} Guild", "organizer") for i in range(20)]
    baselines = fit_baselines(guilds)
    assert baselines.guesses["type_prior"]["hop1"].answer == "guild"
    assert baselines.evaluate(guilds[:4]).f1["type_prior"]["hop1"] == pytest.approx(2 / 3)  # "guild" vs "OrgN Guild"


def test_best_is_chosen_by_cross_fitting_so_memorized_answers_are_not_picked() -> None:
    """Every relation group has distinct answers: fitted on all of its tasks, a guess matches one of
    them, which looks good in-sample; held out it is worthless, so ``best`` does not use it."""
    train = [_task(i, "hop1", f"v{i}", f"rel{i // 2}") for i in range(40)] + \
            [_task(100 + i, "unanswerable", "cannot find", "birth_year") for i in range(4)]
    baselines = fit_baselines(train)
    in_sample = baselines.evaluate(train)
    assert in_sample.f1["relation_prior"]["hop1"] == pytest.approx(0.5)
    assert in_sample.f1["type_prior"]["hop1"] == pytest.approx(1 / 40)
    assert baselines.choice["hop1"] == "type_prior"  # ties (all 0 held out) go to the simplest baseline


def test_guess_tasks_read_trainer_dicts_and_score_like_the_model() -> None:
    task = _task(1, "comparison", "Ann Lee", "birth_year", ("Bo Day", "Ann Lee"))
    as_dict = {**task.to_dict(), "world": 3}  # the trainer's task dicts carry their world's index
    view = GuessTask.of(as_dict)
    assert view == GuessTask.of(task) and view.names == ("Bo Day", "Ann Lee") and view.relation == "birth_year"
    report = fit_baselines([task]).evaluate([as_dict])
    for baseline in ("type_prior", "relation_prior", "cannot_find", "best"):
        answer = fit_baselines([task]).answer(baseline, view)
        assert report.f1[baseline]["all"] == answer_metrics(answer, task.golds, unanswerable=False)["f1"]
    with pytest.raises(ValueError, match="no training tasks"):
        fit_baselines([])


def test_margin_rows_put_the_model_next_to_every_baseline() -> None:
    train = [_task(i, "two_page", "no") for i in range(10)]
    report = fit_baselines(train).evaluate(train[:4])
    rows = margin_rows(report, {"after SFT": {"two_page": 0.5, "all": 0.5}, "after GRPO": {"two_page": 0.75, "all": 0.75}})
    assert [r["type"] for r in rows] == ["two_page", "all"]
    assert rows[-1]["best"] == 1.0 and rows[-1]["margin (after GRPO)"] == pytest.approx(-0.25)
    summary = report.to_dict(model_f1={"two_page": 0.75, "all": 0.75})
    assert summary["margin_over_best"] == {"two_page": -0.25, "all": -0.25}
