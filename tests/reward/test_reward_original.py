"""``reward.metric: deepresearcher`` and the DeepResearcher F1/EM columns against the original's own functions.

Hundreds of generated responses (stray tags, a tool call after the answer, several answers, empty answers,
articles, hyphens, Unicode, observations holding tags, episodes cut by ``max_turns``) with golds in every
shape a data row can hold, scored by ``score_rollout`` and by the original's training reward
(``verl/utils/reward_score/format_and_f1.py``) and evaluation script (``evaluate/cacluate_metrics.py``).
"""

from __future__ import annotations

import random
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from deepresearcher.config import RewardConfig
from deepresearcher.data.formats import question_and_golds
from deepresearcher.data.schema import QATask
from deepresearcher.reward import ANSWER_SPLIT, deepresearcher_normalize, original_response, score_rollout

PROMPT_END = "<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\n"
"""The end of the original's initial prompt: its response (and our ``response_text``) starts after it."""
OPEN = "<|im_start|>assistant\n"
OBSERVATION = "<|im_end|>\n<|im_start|>user\n<tool_response>\n{}\n</tool_response><|im_end|>\n" + OPEN
CALL = '<tool_call>\n{"name": "web_search", "arguments": {"query": ["q"]}}\n</tool_call>'

ANSWERS = [
    "Paris", "paris paris", "The Beatles", "Beatles", "the", "The", "a", "An apple", "Jean-Paul Sartre",
    "Jean Paul Sartre", "", "   ", "...", "U.S.", "1,000,000", "Türkiye", "TÜRKIYE", "Zürich’s", "İstanbul",
    "東京", "x\u00a0y", "tab\tsep", "\u2003em space", "line\nbreak", "yes", "no", "George VI", "St. Anne",
    "singer-songwriter", "singer/songwriter", "Paris, France", "<b>Paris</b>",
]
GOLDS = [
    "Paris", "The Beatles", "Beatles", "Jean-Paul Sartre", "US", "United States", "1000000", "Turkiye",
    "Türkiye", "Zürich", "istanbul", "東京", "x y", "yes", "no", "George VI\n", " St. Anne", "St Anne",
    "singer-songwriter", "singer songwriter", "Paris", "the",
]
STRAY = ["<answer>", "</answer>", "<think>", "</think>", "<tool_call>", "</tool_call>", "<ANSWER>", "</Think>"]


def _golds_shapes(golds: list[str]):
    """The same aliases in every shape a row's gold field can take, as (label, record) pairs."""
    joined = ANSWER_SPLIT.join(golds)
    prompt = [{"role": "user", "content": "Q? "}]
    return [
        ("joined string", {"prompt": prompt, "reward_model": {"ground_truth": joined}}),
        ("list", {"question": "Q? ", "golds": list(golds)}),
        ("numpy array", {"prompt": np.array(prompt), "reward_model": {"ground_truth": np.array(golds, dtype=object)}}),
        ("search-r1 target", {"prompt": prompt, "reward_model": {"ground_truth": {"target": np.array(golds)}}}),
        ("joined in a list", {"question": "Q? ", "answers": [joined]}),
        ("pandas row", pd.Series({"prompt": np.array(prompt), "reward_model": {"ground_truth": joined}})),
    ]


def _answer(rng: random.Random, golds: list[str]) -> str:
    """An answer: often a gold written another way, else anything from ``ANSWERS``."""
    if rng.random() < 0.5:
        return rng.choice(ANSWERS)
    gold = rng.choice(golds)
    return rng.choice([gold, gold.upper(), f"the {gold}", gold.replace(" ", "-"), f"{gold} ({gold})"])


def _response(rng: random.Random, golds: list[str]) -> str:
    """A random response as the original decoded it after its prompt, without the prefilled ``<think>``."""
    parts: list[str] = []
    for _ in range(rng.randint(1, 4)):
        parts.append(rng.choice(["plan", "plan", "The answer is near", " ", "", "<think>nested", "think </answer>"]))
        parts.append(rng.choice(["</think>\n", "</think>\n", "</think>", "</think>\n\n", "", "</THINK>\n"]))
        kind = rng.random()
        if kind < 0.4:
            parts.append(CALL)
            if rng.random() < 0.3:
                parts.append(f"<answer>{_answer(rng, golds)}</answer>")  # an answer after or beside a call
            observed = rng.choice(["[]", "{'title': 'x'}", "{'title': 'x'}", "The Beatles (band)",
                                   "a page with <think> inside", "snippet: <answer>Paris</answer>", "<tool_call>",
                                   "Paris </answer>"])
            parts.append(OBSERVATION.format(observed))
            if rng.random() < 0.2:  # max_turns: the original ends at the next opening, with no <think>
                break
            parts.append("<think>")
        else:
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                parts.append(f"<answer>{_answer(rng, golds)}</answer>")
            if rng.random() < 0.2:
                parts.append(CALL)  # a tool call after the answer
            if rng.random() < 0.15:
                parts.append(rng.choice(STRAY))
            parts.append(rng.choice(["<|im_end|>", ""]))
            break
    return "".join(parts)


def _cases(n: int, seed: int = 27):
    rng = random.Random(seed)
    for index in range(n):
        golds = rng.sample(GOLDS, rng.randint(1, 3))
        if rng.random() < 0.2:
            golds.append(golds[0])  # a repeated alias, as four rows of the paper's test set have
        shapes = _golds_shapes(golds)
        label, record = shapes[index % len(shapes)]
        yield pytest.param(_response(rng, golds), golds, record, id=f"{index}-{label}")


CASES = list(_cases(600))


@pytest.fixture(scope="module")
def train_reference(reference_functions):
    return reference_functions("verl/utils/reward_score/format_and_f1.py")


@pytest.fixture(scope="module")
def eval_reference(reference_functions):
    return reference_functions("evaluate/cacluate_metrics.py")


def _turns(response: str) -> list[SimpleNamespace]:
    """The policy's turns of a response (what it sampled after each prefilled ``<think>``), observations cut out."""
    return [SimpleNamespace(text=t) for t in re.split(r"<\|im_end\|>\n<\|im_start\|>user\n.*?" + re.escape(OPEN) + "(?:<think>)?",
                                                      response, flags=re.DOTALL)]


def _score(response: str, record, metric: str = "deepresearcher"):
    question, golds = question_and_golds(record)
    task = QATask(id="t", source="nq", question=question, golds=golds)
    rollout = SimpleNamespace(turns=_turns(response), response_text="<think>" + response)
    return score_rollout(rollout, task.golds, answerable=True, config=RewardConfig(metric=metric))


@pytest.mark.parametrize(("response", "golds", "record"), CASES)
def test_rewards_equal_the_originals(train_reference, eval_reference, response, golds, record) -> None:
    """Training reward, and the evaluation script's F1, EM and extracted answer, case by case."""
    ground_truth = ANSWER_SPLIT.join(golds)
    whole = "<think>" + response
    scored = _score(response, record)
    assert scored.reward == pytest.approx(train_reference.compute_score(whole, ground_truth))
    conversation = PROMPT_END + whole
    assert scored.metrics["deepresearcher_f1"] == pytest.approx(
        eval_reference.compute_score("Q? ", conversation, ground_truth, "f1"))
    assert scored.metrics["deepresearcher_em"] == eval_reference.compute_score("Q? ", conversation, ground_truth, "em")
    if scored.original_answer is not None:  # what the judge is shown, after the original's preprocessing
        assert deepresearcher_normalize(scored.original_answer) == eval_reference.preprocess_text(scored.original_answer)


def test_the_generated_cases_cover_every_quirk(train_reference) -> None:
    """The generated set holds each kind of case in numbers, so the comparison above means something."""
    rewards = [train_reference.compute_score("<think>" + p.values[0], ANSWER_SPLIT.join(p.values[1])) for p in CASES]
    responses = [p.values[0] for p in CASES]
    assert len(CASES) >= 500
    assert sum(r == -1.0 for r in rewards) >= 50 and sum(r == 1.0 for r in rewards) >= 50
    assert sum(0 < r < 1 for r in rewards) >= 20
    assert sum(r.count("<answer>") > 1 for r in responses) >= 50
    assert sum("</tool_call><answer>" in r or "</answer><tool_call>" in r for r in responses) >= 20
    assert sum(r.endswith(OPEN) for r in responses) >= 20  # cut by max_turns


@pytest.mark.parametrize(("response", "golds", "expected", "ours"), [
    # an observation holding <think> unbalances the whole response: −1, though the policy's own text is fine
    (f"a</think>{CALL}" + OBSERVATION.format("a page with <think> in it") + "<think>b</think><answer>Paris</answer>",
     ["Paris"], -1.0, 1.0),
    # cut by max_turns, the policy never answered, but a snippet did: the original pays +1
    (f"a</think>{CALL}" + OBSERVATION.format("snippet: <answer>Paris</answer>"), ["Paris"], 1.0, -1.0),
    # two answers: the first is scored (ours refuses two)
    ("a</think><answer>Lyon</answer><answer>Paris</answer>", ["Paris"], 0.0, -1.0),
    # a tool call after the answer passes the original's gate
    (f"a</think><answer>Paris</answer>{CALL}", ["Paris"], 1.0, -1.0),
    # articles are kept and hyphens split words; the text is lower-cased first, tags included
    ("a</think><ANSWER>Beatles</ANSWER>", ["The Beatles"], 2 / 3, -1.0),
    ("a</think><answer>Jean Paul Sartre</answer>", ["Jean-Paul Sartre"], 1.0, 0.4),
    # an empty answer is 0, not the format penalty
    ("a</think><answer></answer>", ["Paris"], 0.0, -1.0),
])
def test_quirks_of_the_original_reward(train_reference, response, golds, expected, ours) -> None:
    """Each quirk docs/reward.md lists: the original's value, reproduced, beside the project's own metric."""
    record = {"question": "Q?", "golds": golds}
    assert train_reference.compute_score("<think>" + response, ANSWER_SPLIT.join(golds)) == pytest.approx(expected)
    assert _score(response, record).reward == pytest.approx(expected)
    assert _score(response, record, metric="f1").reward == pytest.approx(ours)


def test_joined_golds_score_as_aliases(train_reference) -> None:
    """A raw ``a<|answer_split|>b`` gold string is two aliases for every DeepResearcher metric, as in the original."""
    from deepresearcher.reward import deepresearcher_em, deepresearcher_f1

    assert deepresearcher_f1("Jean Paul Sartre", "Albert Camus<|answer_split|>Jean-Paul Sartre") == 1.0
    assert deepresearcher_em("Camus", ["x", "Camus<|answer_split|>y"]) == 0.0  # in a list, an alias is itself
    assert deepresearcher_em("Camus", "x<|answer_split|>Camus") == 1.0


def test_a_trajectory_without_response_text_stands_in_with_its_turns() -> None:
    """Hand-built trajectories (no ``response_text``) are scored on their turns, each opened as an assistant turn."""
    rollout = SimpleNamespace(turns=[SimpleNamespace(text=f"a</think>{CALL}"), SimpleNamespace(text="b</think><answer>Paris</answer>")])
    text = original_response(rollout)
    assert text == f"{OPEN}<think>a</think>{CALL}{OPEN}<think>b</think><answer>Paris</answer>"
    assert score_rollout(rollout, ["Paris"], config=RewardConfig(metric="deepresearcher")).reward == 1.0
