"""DeepResearcher's own reward and F1, as its training and evaluation code computed them.

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
answer that normalizes to nothing scores 0, as in the original.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable

__all__ = ["deepresearcher_answer", "deepresearcher_f1", "deepresearcher_normalize", "tags_balanced"]

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


def deepresearcher_f1(answer: str, golds: Iterable[str] | str) -> float:
    """Best token-set F1 of the answer over the golds, after the original's normalization.

    >>> deepresearcher_f1("Jean Paul Sartre", ["Jean-Paul Sartre"]), round(deepresearcher_f1("Beatles", ["The Beatles"]), 2)
    (1.0, 0.67)
    """
    predicted = set(deepresearcher_normalize(answer).split())
    if not predicted:
        return 0.0
    best = 0.0
    for gold in [golds] if isinstance(golds, str) else golds:
        expected = set(deepresearcher_normalize(gold).split())
        common = len(predicted & expected)
        if common:
            precision, recall = common / len(predicted), common / len(expected)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best
