"""DeepResearcher's own reward, F1 and EM, as its training and evaluation code computed them.

The original (``verl/utils/reward_score/format_and_f1.py`` and ``evaluate/cacluate_metrics.py`` in
GAIR-NLP/DeepResearcher, Apache-2.0) is re-stated here in this project's words; tests compare the two on
the same inputs. It differs from the SQuAD-style metrics of ``reward.metrics`` on purpose, and the
differences move numbers:

* normalization lower-cases, turns every ASCII punctuation character into a *space* (``Jean-Paul`` is two
  tokens, ``jean paul``) and squeezes whitespace; articles are **kept** (``Beatles`` vs ``The Beatles``
  is F1 0.67, not 1.0);
* F1 compares token *sets*, not bags (``"paris paris"`` is ``{"paris"}``);
* the answer is the *first* ``<answer>…</answer>`` of the text;
* the format gate is only that ``<think>``, ``<tool_call>`` and ``<answer>`` each open and close the same
  number of times, every opening followed by a closing. Failing it (or having no answer) is the format
  penalty in training and 0 in evaluation.

Golds are aliases; the score is the best over them. Golds that normalize to nothing are skipped, and an
answer that normalizes to nothing scores 0, as in the original. A gold list may also be one string of
aliases joined by ``<|answer_split|>``, the original's ``ground_truth``.

Which text is scored differs between the two original scripts, and both are here:

* training (``deepresearcher_reward``): the *whole* response its reward manager decoded, everything after
  the prompt: every turn, the chat template's turn markers and the observations. So an observation that
  holds an unpaired ``<think>`` breaks the gate (−1), and an ``<answer>`` inside an observation counts
  when the policy wrote none (an episode cut by ``max_turns`` can earn +1 from a search snippet);
* evaluation (``deepresearcher_eval_answer``, ``deepresearcher_em``): only the last assistant turn, the
  text after the last ``<|im_start|>assistant``; a broken gate or no answer scores 0 there, not −1.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable

__all__ = [
    "ANSWER_SPLIT",
    "ASSISTANT_TURN",
    "deepresearcher_answer",
    "deepresearcher_em",
    "deepresearcher_eval_answer",
    "deepresearcher_f1",
    "deepresearcher_normalize",
    "deepresearcher_reward",
    "split_golds",
    "tags_balanced",
]

ANSWER_SPLIT = "<|answer_split|>"
"""Separator of gold aliases in the original's ``reward_model.ground_truth`` (GAIR-NLP/DeepResearcher, Apache-2.0)."""
ASSISTANT_TURN = "<|im_start|>assistant"
"""Where the original's evaluation script cut a conversation to keep its last assistant turn (Qwen's ChatML)."""

_PUNCT_TO_SPACE = str.maketrans(string.punctuation, " " * len(string.punctuation))
_FIRST_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_GATED_TAGS = ("tool_call", "think", "answer")


def deepresearcher_normalize(text: str) -> str:
    """Lower case, every ASCII punctuation character to a space, whitespace squeezed.

    >>> deepresearcher_normalize("Jean-Paul Sartre"), deepresearcher_normalize("The Beatles!")
    ('jean paul sartre', 'the beatles')
    """
    return " ".join(text.lower().translate(_PUNCT_TO_SPACE).split())


def tags_balanced(text: str) -> bool:
    """The original's format gate: each gated tag opens as often as it closes, each opening closed after it.

    >>> tags_balanced("<think>a</think><answer>b</answer>"), tags_balanced("<think>a<answer>b</answer>")
    (True, False)
    """
    for tag in _GATED_TAGS:
        opening, closing = f"<{tag}>", f"</{tag}>"
        if text.count(opening) != text.count(closing):
            return False
        position = 0
        while (start := text.find(opening, position)) != -1:
            end = text.find(closing, start)
            if end == -1:
                return False
            position = end + 1
    return True


def deepresearcher_answer(text: str) -> tuple[str | None, str | None]:
    """(answer, None) from the first ``<answer>`` of a text that passes the gate, else (None, why not).

    >>> deepresearcher_answer("<think>x</think><answer> Paris </answer><answer>Lyon</answer>")
    ('paris', None)
    >>> deepresearcher_answer("<think>x</think>")
    (None, 'no <answer>...</answer> in the text')
    """
    text = text.lower()  # as the original: tags in any case count, and the answer comes out lower-cased
    if not tags_balanced(text):
        return None, "<think>, <tool_call> or <answer> tags do not pair up (the original's tag check)"
    found = _FIRST_ANSWER.search(text)
    if found is None:
        return None, "no <answer>...</answer> in the text"
    return found.group(1).strip(), None


def split_golds(golds: Iterable[str] | str) -> list[str]:
    """Gold aliases as a list; one string is the original's ``ground_truth``, aliases joined by ``<|answer_split|>``.

    >>> split_golds("Paris<|answer_split|>City of Paris"), split_golds(["Paris"])
    (['Paris', 'City of Paris'], ['Paris'])
    """
    return golds.split(ANSWER_SPLIT) if isinstance(golds, str) else list(golds)


def deepresearcher_f1(answer: str, golds: Iterable[str] | str) -> float:
    """Best token-set F1 of the answer over the golds, after the original's normalization.

    >>> deepresearcher_f1("Jean Paul Sartre", ["Jean-Paul Sartre"]), round(deepresearcher_f1("Beatles", ["The Beatles"]), 2)
    (1.0, 0.67)
    >>> deepresearcher_f1("Lyon", "Paris<|answer_split|>Lyon")
    1.0
    """
    predicted = set(deepresearcher_normalize(answer).split())
    if not predicted:
        return 0.0
    best = 0.0
    for gold in split_golds(golds):
        expected = set(deepresearcher_normalize(gold).split())
        common = len(predicted & expected)
        if common:
            precision, recall = common / len(predicted), common / len(expected)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def deepresearcher_em(answer: str, golds: Iterable[str] | str) -> float:
    """1.0 when the answer equals a gold after the original's normalization (articles kept, hyphens split).

    >>> deepresearcher_em("Jean Paul Sartre", ["Jean-Paul Sartre"]), deepresearcher_em("Beatles", ["The Beatles"])
    (1.0, 0.0)
    """
    normalized = deepresearcher_normalize(answer)
    return float(any(deepresearcher_normalize(gold) == normalized for gold in split_golds(golds)))


def deepresearcher_reward(response: str, golds: Iterable[str] | str, *, penalty: float = -1.0) -> float:
    """The original's training reward of a whole response: its F1, or ``penalty`` (−1) when the gate fails.

    >>> deepresearcher_reward("<think>a</think><answer>Paris</answer><|im_end|>", "paris<|answer_split|>city of paris")
    1.0
    >>> deepresearcher_reward("<think>a</think><tool_call>{}</tool_call><|im_end|>\\n<|im_start|>user\\n<think>", ["Paris"])
    -1.0
    """
    answer, _ = deepresearcher_answer(response)
    return penalty if answer is None else deepresearcher_f1(answer, golds)


def deepresearcher_eval_answer(conversation: str) -> tuple[str | None, str | None]:
    """(answer, None) as the original's evaluation script took it, else (None, why not).

    The first ``<answer>`` of the last assistant turn (after the last ``<|im_start|>assistant``), behind the
    tag gate on that turn alone, lower-cased and stripped; the empty string is an answer.

    >>> deepresearcher_eval_answer("<answer>Lyon</answer><|im_end|><|im_start|>assistant\\n<think>b</think><answer>Paris</answer>")
    ('paris', None)
    >>> deepresearcher_eval_answer("<think>a</think><answer></answer><tool_call>{}</tool_call>")
    ('', None)
    """
    return deepresearcher_answer(conversation.lower().split(ASSISTANT_TURN)[-1])
