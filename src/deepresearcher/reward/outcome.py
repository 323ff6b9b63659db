"""The outcome reward of DeepResearcher: one number per rollout, from its answer and its format.

    broken format or no answer          -> format_penalty (−1 by default)
    unanswerable task                   -> 1.0 if the answer is an abstention, else 0.0
    otherwise                           -> best ``reward.metric`` (folded F1 by default) over the gold aliases

Pure functions of strings and flags: no model, no network, safe to call from any process or thread.
A task is *unanswerable* when it says so (``unanswerable=True``) or when every gold alias is one of
the "cannot find" phrasings (the synthetic world marks such tasks with ``golds=["cannot find"]``).
An answer is an *abstention* only when the whole of it is one of those phrasings (a leading "I"/"we"
and a trailing "it"/"the answer"/"one"/"that" allowed): "I cannot find the answer." abstains,
"Paris, or cannot find" does not, so hedging with a guess earns nothing on an unanswerable task.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from deepresearcher.config import RewardConfig
from deepresearcher.reward.deepresearcher import deepresearcher_em, deepresearcher_f1
from deepresearcher.reward.judged import JUDGE_METRICS
from deepresearcher.reward.metrics import cover_em, exact_match, f1_score, normalize_answer, squad_em, squad_f1

__all__ = [
    "ANSWER_METRICS",
    "UNANSWERABLE_GOLD",
    "answer_metrics",
    "is_unanswerable",
    "says_cannot_find",
    "score",
    "score_batch",
]

UNANSWERABLE_GOLD = "cannot find"
"""The gold alias that marks a task without an answer in its corpus."""

_METRICS = {
    "em": exact_match,
    "f1": f1_score,
    "cover_em": cover_em,
    "squad_em": squad_em,
    "squad_f1": squad_f1,
    "deepresearcher_f1": deepresearcher_f1,
    "deepresearcher_em": deepresearcher_em,
}
ANSWER_METRICS: tuple[str, ...] = tuple(_METRICS)
"""Every answer metric by name: folded EM/F1/cover-EM, official SQuAD EM/F1, DeepResearcher's F1 and EM."""
_ANSWER_METRIC = {"deepresearcher": "deepresearcher_f1"}
"""Reward metrics that score a whole response, and the answer metric they give one answer."""
_SUBJECTS = ("i", "we")
_OBJECTS = ("it", "answer", "one", "that")


_DEFAULT_CONFIG = RewardConfig()


@lru_cache(maxsize=64)
def _phrase_set(phrases: tuple[str, ...]) -> frozenset[str]:
    return frozenset(p for p in (normalize_answer(x) for x in (*phrases, UNANSWERABLE_GOLD)) if p)


def _normalized_phrases(phrases: Sequence[str] | None) -> frozenset[str]:
    return _phrase_set(tuple(_DEFAULT_CONFIG.unanswerable_phrases if phrases is None else phrases))


def is_unanswerable(golds: Sequence[str], phrases: Sequence[str] | None = None) -> bool:
    """True when the gold list holds only "cannot find"-style aliases.

    >>> is_unanswerable(["cannot find"]), is_unanswerable(["Paris"]), is_unanswerable([])
    (True, False, False)
    """
    accepted = _normalized_phrases(phrases)
    normalized = [normalize_answer(g) for g in golds]
    return bool(normalized) and all(g in accepted for g in normalized)


def says_cannot_find(answer: str | None, phrases: Sequence[str] | None = None) -> bool:
    """True when the whole normalized answer is an accepted "cannot find" phrasing.

    A leading subject (``I``, ``we``) and a trailing object (``it``, ``the answer``, ``one``, ``that``)
    may frame the phrase; anything else (a guess beside it) makes it an answer, not an abstention.

    >>> says_cannot_find("I cannot find the answer."), says_cannot_find("Paris"), says_cannot_find("Paris, or cannot find")
    (True, False, False)
    """
    if not answer:
        return False
    accepted = _normalized_phrases(phrases)
    tokens = normalize_answer(answer).split()
    starts = [0, 1] if tokens[:1] and tokens[0] in _SUBJECTS else [0]
    ends = [len(tokens), len(tokens) - 1] if tokens[-1:] and tokens[-1] in _OBJECTS else [len(tokens)]
    return any(" ".join(tokens[a:b]) in accepted for a in starts for b in ends if a < b)


def answer_metrics(
    answer: str | None,
    golds: Sequence[str],
    *,
    unanswerable: bool | None = None,
    phrases: Sequence[str] | None = None,
    names: Sequence[str] = ANSWER_METRICS,
) -> dict[str, float]:
    """The answer metrics ``names`` of one answer, as evaluation reports them (no format penalty here).

    On an unanswerable task each is 1.0 when the answer is an abstention, else 0.0; no answer scores 0.

    >>> answer_metrics("Barack Obama", ["Obama"], names=("em", "f1", "cover_em"))
    {'em': 0.0, 'f1': 0.6666666666666666, 'cover_em': 1.0}
    """
    if unanswerable is None:
        unanswerable = is_unanswerable(golds, phrases)
    if unanswerable:
        hit = float(says_cannot_find(answer, phrases))
        return dict.fromkeys(names, hit)
    if answer is None:
        return dict.fromkeys(names, 0.0)
    return {name: float(_METRICS[name](answer, golds)) for name in names}


def score(
    answer: str | None,
    golds: Sequence[str],
    format_ok: bool = True,
    *,
    config: RewardConfig | None = None,
    unanswerable: bool | None = None,
) -> float:
    """The outcome reward of one rollout.

    >>> score("Paris", ["Paris", "City of Paris"])
    1.0
    >>> score("Paris", ["Paris"], format_ok=False)
    -1.0
    >>> score(None, ["Paris"])
    -1.0
    >>> score("I cannot find it", ["cannot find"])
    1.0
    """
    config = config or _DEFAULT_CONFIG
    if config.metric in JUDGE_METRICS:
        raise ValueError(f"reward.metric={config.metric} asks a judge model, which this pure function does not: "
                         "score with reward.score_rollouts (or score_rollout).")
    if not format_ok or answer is None or not answer.strip():
        return float(config.format_penalty)
    if unanswerable is None:
        unanswerable = is_unanswerable(golds, config.unanswerable_phrases)
    if unanswerable:
        return float(says_cannot_find(answer, config.unanswerable_phrases))
    return float(_METRICS[_ANSWER_METRIC.get(config.metric, config.metric)](answer, golds))


def score_batch(
    answers: Sequence[str | None],
    golds_list: Sequence[Sequence[str]],
    format_ok_list: Sequence[bool] | None = None,
    *,
    config: RewardConfig | None = None,
    unanswerable_list: Sequence[bool | None] | None = None,
) -> list[float]:
    """Rewards of a batch of rollouts; the lists are aligned and must have equal length.

    >>> score_batch(["Paris", "Lyon", None], [["Paris"], ["Paris"], ["Paris"]], [True, True, True])
    [1.0, 0.0, -1.0]
    """
    n = len(answers)
    format_ok_list = [True] * n if format_ok_list is None else format_ok_list
    unanswerable_list = [None] * n if unanswerable_list is None else unanswerable_list
    lengths = {
        "answers": n,
        "golds_list": len(golds_list),
        "format_ok_list": len(format_ok_list),
        "unanswerable_list": len(unanswerable_list),
    }
    if len(set(lengths.values())) != 1:
        raise ValueError(f"score_batch needs aligned lists of one length; got lengths {lengths}.")
    config = config or _DEFAULT_CONFIG
    return [
        score(a, g, ok, config=config, unanswerable=u)
        for a, g, ok, u in zip(answers, golds_list, format_ok_list, unanswerable_list)
    ]
