"""Answer metrics of open-domain QA: normalization, token F1, exact match and cover-EM.

Two families live here. ``squad_em`` / ``squad_f1`` are the official SQuAD v1.1 script, character for
character (its normalization, no Unicode folding), for numbers that compare with papers that ran that
script. ``em`` / ``f1`` / ``cover_em`` are this project's *folded* metrics, the ones the synthetic world
and the reports lead with. (DeepResearcher's own F1 is different again: ``reward.deepresearcher``.)

The folded metrics follow the official SQuAD v1.1 / HotpotQA evaluation scripts:

* normalize: lower case, drop punctuation, drop the articles *a*, *an*, *the*, squeeze whitespace;
* F1: bag-of-tokens overlap of the normalized strings (HotpotQA's variant: ``yes``/``no``/``noanswer``
  score only against themselves, so "yes it is" gets no partial credit against "no");
* EM: normalized strings are equal;
* cover-EM: the normalized gold occurs in the normalized answer as a whole-token run.

Each metric is the best over the gold aliases. Two deliberate departures from the scripts, both
invisible on ASCII text with non-empty golds:

* Unicode is folded first (NFKD, combining marks dropped): ``"Türkiye"`` equals ``"Turkiye"``, full-width
  digits equal ASCII ones, and Unicode punctuation (curly quotes, dashes) is removed like ASCII punctuation.
  TriviaQA's alias lists mix both spellings, and models write either.
* Aliases that normalize to the empty string are ignored. An empty alias would make cover-EM true for
  every answer; the scripts never meet one because their golds are never empty.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from functools import lru_cache

from deepresearcher.text import fold_unicode

__all__ = [
    "best_over_golds",
    "squad_em",
    "squad_f1",
    "squad_normalize",
    "cover_em",
    "cover_em_one",
    "exact_match",
    "exact_match_one",
    "f1_score",
    "normalize_answer",
    "token_f1",
]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCT = frozenset(string.punctuation)
_DROP_ASCII_PUNCT = str.maketrans("", "", string.punctuation)
_YES_NO = frozenset({"yes", "no", "noanswer"})


def _is_punct(ch: str) -> bool:
    return ch in _ASCII_PUNCT or unicodedata.category(ch).startswith("P")


@lru_cache(maxsize=65536)
def normalize_answer(text: str) -> str:
    """Normalize an answer the SQuAD/HotpotQA way (after folding Unicode).

    >>> normalize_answer("The  Eiffel-Tower!")
    'eiffeltower'
    >>> normalize_answer("An apple a day")
    'apple day'
    >>> normalize_answer("Türkiye’s")
    'turkiyes'
    """
    text = fold_unicode(text).lower().translate(_DROP_ASCII_PUNCT)
    if not text.isascii():
        text = "".join(ch for ch in text if not _is_punct(ch))
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


@lru_cache(maxsize=65536)
def _bag(normalized: str) -> tuple[Counter[str], int]:
    """Token counts of a normalized string (cached: golds recur across a group's rollouts)."""
    tokens = normalized.split()
    return Counter(tokens), len(tokens)


def _overlap(pred_bag: Counter[str], pred_len: int, gold_bag: Counter[str], gold_len: int) -> tuple[float, float, float]:
    """(F1, precision, recall) of two token bags."""
    if pred_len > gold_len:  # walk the smaller bag
        num_same = sum(min(n, pred_bag[t]) for t, n in gold_bag.items() if t in pred_bag)
    else:
        num_same = sum(min(n, gold_bag[t]) for t, n in pred_bag.items() if t in gold_bag)
    if num_same == 0:
        return 0.0, 0.0, 0.0
    precision = num_same / pred_len
    recall = num_same / gold_len
    return 2 * precision * recall / (precision + recall), precision, recall


def token_f1(prediction: str, gold: str) -> tuple[float, float, float]:
    """(F1, precision, recall) of one prediction against one gold, HotpotQA's official definition.

    >>> token_f1("the Barack Obama", "Obama")
    (0.6666666666666666, 0.5, 1.0)
    >>> token_f1("yes it is", "yes")
    (0.0, 0.0, 0.0)
    """
    pred_norm, gold_norm = normalize_answer(prediction), normalize_answer(gold)
    if (pred_norm in _YES_NO or gold_norm in _YES_NO) and pred_norm != gold_norm:
        return 0.0, 0.0, 0.0
    return _overlap(*_bag(pred_norm), *_bag(gold_norm))


def _usable_golds(golds: Iterable[str]) -> list[str]:
    return [g for g in golds if normalize_answer(g)]


def best_over_golds(metric: Callable[[str, str], float], prediction: str, golds: Iterable[str] | str) -> float:
    """The best ``metric(prediction, gold)`` over the aliases; 0.0 without a usable alias or answer.

    >>> best_over_golds(exact_match_one, "Paris", ["Lyon", "paris."])
    1.0
    """
    if isinstance(golds, str):
        golds = [golds]
    usable = _usable_golds(golds)
    if not usable or not normalize_answer(prediction):
        return 0.0
    return max(float(metric(prediction, g)) for g in usable)


def exact_match_one(prediction: str, gold: str) -> float:
    """1.0 when the normalized strings are equal."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def cover_em_one(prediction: str, gold: str) -> float:
    """1.0 when the normalized gold is a whole-token run inside the normalized prediction.

    Token boundaries matter: gold ``1`` must not be found inside ``1988``.
    """
    return float(f" {normalize_answer(gold)} " in f" {normalize_answer(prediction)} ")


def f1_score(prediction: str, golds: Iterable[str] | str) -> float:
    """Best token F1 over the gold aliases.

    >>> f1_score("Barack Obama", ["Obama", "Barack Hussein Obama"])
    0.8
    """
    return best_over_golds(lambda p, g: token_f1(p, g)[0], prediction, golds)


def exact_match(prediction: str, golds: Iterable[str] | str) -> float:
    """Best exact match over the gold aliases.

    >>> exact_match("the U.S.", ["US", "United States"])
    1.0
    """
    return best_over_golds(exact_match_one, prediction, golds)


def cover_em(prediction: str, golds: Iterable[str] | str) -> float:
    """1.0 when some gold alias is covered by the answer (whole tokens, after normalization).

    >>> cover_em("It was Barack Obama, in 2009", ["Barack Obama"])
    1.0
    >>> cover_em("In 1988", ["1"])
    0.0
    """
    return best_over_golds(cover_em_one, prediction, golds)


# ---------------------------------------------------------------------------- the official SQuAD script


@lru_cache(maxsize=65536)
def squad_normalize(text: str) -> str:
    """The official SQuAD v1.1 normalization: lower case, drop ASCII punctuation and articles, squeeze spaces.

    No Unicode folding: ``é`` stays ``é`` and a curly apostrophe stays a character of its word.

    >>> squad_normalize("The  Eiffel-Tower!"), squad_normalize("Türkiye’s")
    ('eiffeltower', 'türkiye’s')
    """
    text = _ARTICLES.sub(" ", text.lower().translate(_DROP_ASCII_PUNCT))
    return " ".join(text.split())


def _squad_best(metric: Callable[[str, str], float], prediction: str, golds: Iterable[str] | str) -> float:
    """The script's ``metric_max_over_ground_truths`` (0.0 for an empty gold list, where the script raises)."""
    golds = [golds] if isinstance(golds, str) else list(golds)
    return max((float(metric(prediction, g)) for g in golds), default=0.0)


def _squad_f1_one(prediction: str, gold: str) -> float:
    pred, ref = squad_normalize(prediction).split(), squad_normalize(gold).split()
    return _overlap(Counter(pred), len(pred), Counter(ref), len(ref))[0]


def squad_f1(prediction: str, golds: Iterable[str] | str) -> float:
    """Best official SQuAD v1.1 token F1 over the golds (no yes/no rule, no folding).

    >>> squad_f1("Beyoncé Knowles", ["Beyonce Knowles"])
    0.5
    """
    return _squad_best(_squad_f1_one, prediction, golds)


def squad_em(prediction: str, golds: Iterable[str] | str) -> float:
    """Best official SQuAD v1.1 exact match over the golds.

    >>> squad_em("the Beatles.", ["Beatles"]), squad_em("Türkiye", ["Turkiye"])
    (1.0, 0.0)
    """
    return _squad_best(lambda p, g: squad_normalize(p) == squad_normalize(g), prediction, golds)
