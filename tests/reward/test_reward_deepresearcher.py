"""DeepResearcher's own F1 and format gate, against the original's functions where they differ from SQuAD's."""

from __future__ import annotations

import doctest

import pytest

import deepresearcher.reward.deepresearcher
from deepresearcher.config import RewardConfig
from deepresearcher.reward import (
    deepresearcher_answer,
    deepresearcher_f1,
    f1_score,
    score,
    score_rollout,
    squad_f1,
    tags_balanced,
)

ANSWER_SPLIT = "<|answer_split|>"

# (answer, golds): cases where the original's F1 and the SQuAD-style ones disagree, and ordinary ones
CASES = [
    ("Jean Paul Sartre", ["Jean-Paul Sartre"]),
    ("Beatles", ["The Beatles"]),
    ("paris paris", ["Paris"]),
    ("the U.S.", ["US", "United States"]),
    ("Barack Obama", ["Obama", "Barack Hussein Obama"]),
    ("yes it is", ["yes"]),
    ("Türkiye’s capital", ["Turkiye"]),
    ("1,000,000", ["1000000", "one million"]),
    ("an apple a day", ["Apple"]),
    ("", ["x"]),
    ("...", ["...", "dots"]),
]

# whole policy texts (the prefill included) for the format gate and the first-answer rule
TEXTS = [
    "<think>look</think><answer>Paris</answer>",
    "<think>look</think><tool_call>{}</tool_call><think>ok</think><answer>Paris</answer>",
    "<think>a</think><answer>Lyon</answer><answer>Paris</answer>",  # the first answer counts
    "<think>a<answer>Paris</answer>",  # an unclosed think
    "<think>a</think></answer>Paris<answer>",  # a closing before its opening
    "<think>a</think>Paris",  # no answer at all
    "<THINK>a</THINK><ANSWER>Paris</ANSWER>",  # the original lower-cases first
    "<think>a</think><tool_call>x</tool_call><answer>Jean-Paul</answer><tool_call>",
]


def test_known_values_where_the_original_differs_from_squad() -> None:
    """Hyphens split words and articles stay: the paper's F1 is not the SQuAD F1."""
    assert deepresearcher_f1("Jean Paul Sartre", ["Jean-Paul Sartre"]) == 1.0
    assert f1_score("Jean Paul Sartre", ["Jean-Paul Sartre"]) == pytest.approx(0.4)
    assert deepresearcher_f1("Beatles", ["The Beatles"]) == pytest.approx(2 / 3)
    assert f1_score("Beatles", ["The Beatles"]) == squad_f1("Beatles", ["The Beatles"]) == 1.0
    assert deepresearcher_f1("paris paris", ["Paris"]) == 1.0  # token sets, not bags
    assert squad_f1("paris paris", ["Paris"]) == pytest.approx(2 / 3)


@pytest.mark.parametrize(("answer", "golds"), CASES)
def test_f1_equals_the_originals(reference_functions, answer: str, golds: list[str]) -> None:
    """On a text holding one answer, our F1 is the original training reward's, for every case."""
    original = reference_functions("verl/utils/reward_score/format_and_f1.py")
    text = f"<think>x</think><answer>{answer}</answer>"
    expected = original.compute_score(text, ANSWER_SPLIT.join(golds))
    assert deepresearcher_f1(deepresearcher_answer(text)[0], golds) == pytest.approx(expected)


@pytest.mark.parametrize("text", TEXTS)
def test_gate_and_first_answer_equal_the_originals(reference_functions, text: str) -> None:
    """The gate rejects what the original rejects (its −1), and the first answer is the one scored."""
    original = reference_functions("verl/utils/reward_score/format_and_f1.py")
    golds = ["Paris", "Jean Paul"]
    expected = original.compute_score(text, ANSWER_SPLIT.join(golds))
    answer, reason = deepresearcher_answer(text)
    assert tags_balanced(text.lower()) == original.check_tags_balance(text.lower())
    if expected == -1.0:
        assert answer is None and reason
    else:
        assert deepresearcher_f1(answer, golds) == pytest.approx(expected)


@pytest.mark.parametrize("text", [t for t in TEXTS if t.startswith("<think>")])
def test_rollout_reward_equals_the_original_training_reward(reference_functions, text: str) -> None:
    """With ``reward.metric: deepresearcher_f1`` a rollout (its turns after the prefilled ``<think>``) earns the
    original's reward for the same response text: its F1, or −1 when its gate fails."""
    from types import SimpleNamespace

    original = reference_functions("verl/utils/reward_score/format_and_f1.py")
    golds = ["Paris", "Jean Paul"]
    rollout = SimpleNamespace(turns=[SimpleNamespace(text=text[len("<think>"):])])
    scored = score_rollout(rollout, golds, config=RewardConfig(metric="deepresearcher_f1"))
    assert scored.reward == pytest.approx(original.compute_score(text, ANSWER_SPLIT.join(golds)))
    assert scored.metrics["deepresearcher_f1"] == max(scored.reward, 0.0)


def test_the_evaluation_script_normalizes_as_the_training_reward(reference_functions) -> None:
    """The original's evaluation script (its F1 column) uses the same normalization as its reward."""
    evaluation = reference_functions("evaluate/cacluate_metrics.py")
    for answer, golds in CASES:
        expected = evaluation.compute_score("q", f"<answer>{answer}</answer>", ANSWER_SPLIT.join(golds), "f1")
        assert deepresearcher_f1(answer, golds) == pytest.approx(expected)


def test_reward_metric_deepresearcher_f1_scores_answers() -> None:
    """``reward.metric: deepresearcher_f1`` makes the original's F1 the reward of a well-formed answer."""
    config = RewardConfig(metric="deepresearcher_f1")
    assert score("Beatles", ["The Beatles"], config=config) == pytest.approx(2 / 3)
    assert score("Beatles", ["The Beatles"]) == 1.0
    whole = RewardConfig(metric="deepresearcher")  # one answer string: the original's F1 of it
    assert score("Beatles", ["The Beatles"], config=whole) == pytest.approx(2 / 3)


@pytest.mark.parametrize("module", [deepresearcher.reward.deepresearcher])
def test_doctests(module) -> None:
    """The examples in the docstrings are true."""
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
