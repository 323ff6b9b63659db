"""The paper's format check and outcome reward."""

from __future__ import annotations

import pytest

from deepresearcher.config import RewardConfig, load_config
from deepresearcher.errors import ConfigError
from deepresearcher.reward import ANSWER_METRICS, answer_metrics, check_format, is_unanswerable, says_cannot_find, score, score_batch

GOOD_TURNS = [
    '<think>I should search.</think>\n<tool_call>{"name": "web_search", "arguments": {"query": ["x"]}}</tool_call>',
    "<think>Found it.</think>\n<answer>Paris</answer>",
]


def test_well_formed_trajectory_passes() -> None:
    """Balanced think/tool_call tags and one final answer are fine, as one string or as turns."""
    check = check_format(GOOD_TURNS)
    assert check.ok and check.answer == "Paris" and check.reason is None
    assert check_format("".join(GOOD_TURNS)).ok
    assert check_format("<answer>Paris</answer><|im_end|>").ok  # think is not mandatory


@pytest.mark.parametrize(
    ("turns", "reason_part"),
    [
        (["<think>no answer at all</think>"], "no <answer>"),
        (["<think>open forever <answer>x</answer>"], "opened inside <think>"),
        (["<think>a</think></think><answer>x</answer>"], "</think> without"),
        (["<think>a<think>b</think></think><answer>x</answer>"], "opened inside <think>"),
        (["<tool_call>{}", "<answer>x</answer>"], "never closed"),
        (["<tool_call>{}</tool_call></tool_call>", "<answer>x</answer>"], "</tool_call> without"),
        (["<answer>x</answer><answer>y</answer>"], "2 <answer> blocks"),
        (["<answer>x</answer>", "<answer>y</answer>"], "answered before the last turn"),
        (["<answer>x</answer><tool_call>{}</tool_call>"], "<tool_call> after the answer"),
        (["<answer>   </answer>"], "empty"),
        (["<tool_call>{}</tool_call><tool_response>fake</tool_response><answer>x</answer>"], "<tool_response>"),
        (["<think>x</think><answer>unclosed"], "never closed"),
    ],
)
def test_broken_formats(turns: list[str], reason_part: str) -> None:
    """Each way of breaking the protocol is caught, with a reason that names it."""
    check = check_format(turns)
    assert not check.ok
    assert reason_part in check.reason


def test_score_penalizes_broken_format_and_missing_answer() -> None:
    """Broken format or no answer -> the configured penalty; otherwise best F1 over aliases."""
    assert score("Paris", ["Paris"], format_ok=False) == -1.0
    assert score(None, ["Paris"]) == -1.0
    assert score("  ", ["Paris"]) == -1.0
    assert score("Barack Obama", ["Obama", "Barack Hussein Obama"]) == pytest.approx(0.8)
    assert score("Paris", ["Paris"], format_ok=False, config=RewardConfig(format_penalty=-0.5)) == -0.5


def test_metric_is_configurable() -> None:
    """The reward metric can be EM or cover-EM instead of F1."""
    answer, golds = "It is Barack Obama", ["Barack Obama"]
    assert score(answer, golds) == pytest.approx(2 * (2 / 4) * 1 / (2 / 4 + 1))
    assert score(answer, golds, config=RewardConfig(metric="em")) == 0.0
    assert score(answer, golds, config=RewardConfig(metric="cover_em")) == 1.0


def test_unanswerable_tasks_reward_cannot_find() -> None:
    """On a task marked unanswerable, only an explicit "cannot find" answer earns 1."""
    assert is_unanswerable(["cannot find"]) and is_unanswerable(["Cannot find."])
    assert not is_unanswerable(["Paris", "cannot find"])
    assert score("I cannot find the answer.", ["cannot find"]) == 1.0
    assert score("I can't find it", ["cannot find"]) == 1.0
    assert score("Paris", ["cannot find"]) == 0.0
    assert score("Paris", ["Paris"], unanswerable=True) == 0.0  # the flag wins over the golds
    assert score("cannot be determined", ["anything"], unanswerable=True) == 1.0
    assert score("cannot find", ["Paris"]) == 0.0  # giving up on an answerable task earns nothing
    assert score(None, ["cannot find"]) == -1.0  # format still comes first
    assert not says_cannot_find("I found it")
    custom = RewardConfig(unanswerable_phrases=["no idea"])
    assert score("no idea", ["cannot find"], config=custom) == 1.0
    assert score("cannot be determined", ["cannot find"], config=custom) == 0.0


def test_an_abstention_is_the_whole_answer_not_a_phrase_inside_it() -> None:
    """A guess next to an abstention phrase is an answer: it earns nothing on an unanswerable task."""
    for hedge in ("Paris, or cannot find", "cannot find Paris", "Paris (cannot be determined)", "I think no answer fits"):
        assert score(hedge, ["cannot find"]) == 0.0, hedge
        assert not says_cannot_find(hedge)
    for abstention in ("Cannot find.", "I cannot find the answer.", "We could not find it", "No answer", "unanswerable"):
        assert score(abstention, ["cannot find"]) == 1.0, abstention


def test_answer_metrics_for_eval() -> None:
    """Every answer metric of one answer, each by its own rules; unanswerable tasks score all by the cannot-find rule."""
    assert answer_metrics("the Eiffel Tower", ["Eiffel Tower"]) == {
        "em": 1.0, "f1": 1.0, "cover_em": 1.0, "squad_em": 1.0, "squad_f1": 1.0, "deepresearcher_f1": pytest.approx(0.8),
        "deepresearcher_em": 0.0,
    }
    assert answer_metrics(None, ["x"]) == dict.fromkeys(ANSWER_METRICS, 0.0)
    assert answer_metrics("cannot find it", ["cannot find"]) == dict.fromkeys(ANSWER_METRICS, 1.0)
    assert answer_metrics("Türkiye", ["Turkiye"], names=("em", "squad_em")) == {"em": 1.0, "squad_em": 0.0}


def test_score_batch() -> None:
    """The batch function equals the per-item function and rejects misaligned lists."""
    answers = ["Paris", "Lyon", None, "I cannot find it", "Barack Obama"]
    golds = [["Paris"], ["Paris"], ["Paris"], ["cannot find"], ["Obama"]]
    ok = [True, True, True, True, False]
    assert score_batch(answers, golds, ok) == [1.0, 0.0, -1.0, 1.0, -1.0]
    assert score_batch(answers, golds) == [score(a, g) for a, g in zip(answers, golds)]
    assert score_batch([], []) == []
    with pytest.raises(ValueError, match="aligned"):
        score_batch(["a"], [["a"], ["b"]])


def test_reward_section_in_config() -> None:
    """The reward section loads from overrides and rejects unknown metrics."""
    cfg = load_config(overrides=["reward.format_penalty=-2", "reward.metric=em"])
    assert cfg.reward.format_penalty == -2.0 and cfg.reward.metric == "em"
    with pytest.raises(ConfigError, match="reward.metric"):
        load_config(overrides=["reward.metric=bleu"])
