"""Metrics against literal copies of the official SQuAD v1.1 and HotpotQA evaluation functions."""

from __future__ import annotations

import doctest
import re
import string
from collections import Counter

import pytest

import deepresearcher.reward.format
import deepresearcher.reward.metrics
import deepresearcher.reward.outcome
from deepresearcher.reward import cover_em, exact_match, f1_score, normalize_answer, squad_em, squad_f1, token_f1

# ---- literal copy of the official SQuAD v1.1 evaluate-v1.1.py (normalize, f1, em, max over golds) ----


def squad_normalize_answer(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def squad_f1_score(prediction, ground_truth):
    prediction_tokens = squad_normalize_answer(prediction).split()
    ground_truth_tokens = squad_normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def squad_exact_match_score(prediction, ground_truth):
    return squad_normalize_answer(prediction) == squad_normalize_answer(ground_truth)


def squad_metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    scores_for_ground_truths = []
    for ground_truth in ground_truths:
        score = metric_fn(prediction, ground_truth)
        scores_for_ground_truths.append(score)
    return max(scores_for_ground_truths)


# ---- literal copy of the official HotpotQA hotpot_evaluate_v1.py f1_score ----


def hotpot_f1_score(prediction, ground_truth):
    normalized_prediction = squad_normalize_answer(prediction)
    normalized_ground_truth = squad_normalize_answer(ground_truth)

    ZERO_METRIC = (0, 0, 0)

    if normalized_prediction in ["yes", "no", "noanswer"] and normalized_prediction != normalized_ground_truth:
        return ZERO_METRIC
    if normalized_ground_truth in ["yes", "no", "noanswer"] and normalized_prediction != normalized_ground_truth:
        return ZERO_METRIC

    prediction_tokens = normalized_prediction.split()
    ground_truth_tokens = normalized_ground_truth.split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return ZERO_METRIC
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1, precision, recall


# ---- tricky ASCII cases: articles, punctuation, numbers, whitespace, repeated tokens, yes/no ----

CASES: list[tuple[str, list[str]]] = [
    ("The Beatles", ["Beatles"]),
    ("the the the", ["the"]),  # everything is an article: both sides normalize to ""
    ("An American in Paris", ["American in Paris"]),
    ("Theatre", ["the atre"]),  # "the" inside a word is not an article
    ("anagram", ["an agram"]),
    ("A.B.C. Corp.", ["ABC Corp"]),
    ("U.S.A.", ["USA", "United States"]),
    ("rock'n'roll", ["rock n roll"]),
    ("1,000,000", ["1000000"]),
    ("3.14", ["314"]),
    ("1939-1945", ["1939 to 1945"]),
    ("$5 million", ["5 million dollars"]),
    ("  New   York\tCity \n", ["new york city"]),
    ("Paris Paris Paris", ["Paris"]),  # repeated tokens: Counter intersection caps overlap at 1
    ("Paris, France", ["Paris", "France", "Paris France"]),
    ("John Smith Jr.", ["John Smith", "J. Smith Jr."]),
    ("yes", ["yes"]),
    ("yes it is", ["yes"]),
    ("no", ["yes"]),
    ("noanswer", ["No Answer"]),
    ("It was 1988", ["1988", "in 1988"]),
    ("December 1972", ["14 December 1972 UTC", "December 1972"]),
    ("(a) the answer", ["answer"]),
    ("Mr. & Mrs. Smith", ["Mr and Mrs Smith"]),
    ("C++", ["C"]),
    ("42", ["forty-two", "42"]),
    ("Obama", ["Barack Obama", "Barack Hussein Obama II"]),
]


@pytest.mark.parametrize(("prediction", "golds"), CASES)
def test_normalize_equals_official_on_ascii(prediction: str, golds: list[str]) -> None:
    """On ASCII text our normalization is character-for-character the official one."""
    for text in [prediction, *golds]:
        assert normalize_answer(text) == squad_normalize_answer(text)


@pytest.mark.parametrize(("prediction", "golds"), CASES)
def test_token_f1_equals_hotpotqa(prediction: str, golds: list[str]) -> None:
    """Per-alias (F1, precision, recall) equal HotpotQA's official function."""
    for gold in golds:
        assert token_f1(prediction, gold) == pytest.approx(hotpot_f1_score(prediction, gold))


@pytest.mark.parametrize(("prediction", "golds"), CASES)
def test_best_over_aliases_equals_official(prediction: str, golds: list[str]) -> None:
    """F1 is HotpotQA's max over aliases; EM is SQuAD's max over aliases (with non-empty normalized golds)."""
    usable = [g for g in golds if squad_normalize_answer(g)]
    if not usable or not squad_normalize_answer(prediction):
        assert f1_score(prediction, golds) == 0.0 and exact_match(prediction, golds) == 0.0
        return
    official_f1 = squad_metric_max_over_ground_truths(lambda p, g: hotpot_f1_score(p, g)[0], prediction, usable)
    official_em = squad_metric_max_over_ground_truths(squad_exact_match_score, prediction, usable)
    assert f1_score(prediction, golds) == pytest.approx(official_f1)
    assert exact_match(prediction, golds) == float(official_em)


def test_f1_matches_squad_outside_yes_no() -> None:
    """Where no yes/no is involved, HotpotQA's F1 is SQuAD's, and so is ours."""
    for prediction, golds in CASES:
        for gold in golds:
            if {squad_normalize_answer(prediction), squad_normalize_answer(gold)} & {"yes", "no", "noanswer"}:
                continue
            assert token_f1(prediction, gold)[0] == pytest.approx(squad_f1_score(prediction, gold))


def test_known_values() -> None:
    """Hand-computed values pin the definitions."""
    assert f1_score("Barack Obama", ["Obama"]) == pytest.approx(2 / 3)
    assert f1_score("Paris Paris Paris", ["Paris"]) == pytest.approx(0.5)  # p=1/3, r=1
    assert f1_score("yes it is", ["yes"]) == 0.0  # HotpotQA: yes/no get no partial credit
    assert exact_match("The U.S.A.", ["USA"]) == 1.0
    assert f1_score("Obama", ["Barack Obama", "Obama"]) == 1.0  # best alias wins


def test_unicode_folding() -> None:
    """Accents, ligatures, full-width digits and Unicode punctuation fold to their plain forms."""
    assert normalize_answer("Türkiye") == "turkiye"
    assert exact_match("Türkiye", ["turkiye"]) == 1.0
    assert exact_match("Ｔｏｋｙｏ １９６４", ["Tokyo 1964"]) == 1.0
    assert exact_match("ﬁnal", ["final"]) == 1.0
    assert exact_match("“Hello” — world…", ['"hello" world']) == 1.0
    assert exact_match("Małgorzata Braunek", ["Malgorzata Braunek"]) == 0.0  # ł is a letter, not ł+mark
    assert exact_match("Małgorzata Braunek", ["Małgorzata Braunek"]) == 1.0
    assert exact_match("Ｃａｆé", ["cafe"]) == 1.0
    assert normalize_answer("北京 大学") == "北京 大学"  # non-Latin scripts survive
    # NFC and NFD spellings of the same word are equal.
    assert exact_match("Cafe\u0301", ["Caf\u00e9"]) == 1.0


def test_empty_strings() -> None:
    """Empty answers score 0, and aliases that normalize to nothing are ignored (else cover-EM is always 1)."""
    assert f1_score("", ["Paris"]) == 0.0
    assert exact_match("", ["Paris"]) == 0.0
    assert cover_em("", ["Paris"]) == 0.0
    assert cover_em("Paris", [""]) == 0.0
    assert cover_em("Paris", ["the", ""]) == 0.0
    assert exact_match("the", ["a"]) == 0.0
    assert f1_score("Paris", []) == 0.0
    assert exact_match("Paris", ["", "Paris"]) == 1.0


def test_cover_em() -> None:
    """Cover-EM: the normalized gold is a whole-token run inside the normalized answer."""
    assert cover_em("The answer is Barack Obama.", ["Barack Obama"]) == 1.0
    assert cover_em("Obama", ["Barack Obama"]) == 0.0
    assert cover_em("Born in 1988, he", ["1988"]) == 1.0
    assert cover_em("In 1988", ["1", "198"]) == 0.0
    assert cover_em("Obama Barack", ["Barack Obama"]) == 0.0  # order matters
    assert cover_em("x", ["y", "X."]) == 1.0
    assert cover_em("paris", "Paris") == 1.0  # a single gold string is accepted too


# Unicode cases: the official script does not fold, so these differ from the folded metrics
UNICODE_CASES: list[tuple[str, list[str]]] = [
    ("Türkiye", ["Turkiye"]),
    ("Beyoncé Knowles", ["Beyonce Knowles", "Beyoncé"]),
    ("“Paris”", ["Paris"]),
    ("１９６４", ["1964"]),
    ("Zürich – Genève", ["Zurich Geneva"]),
    ("ﬁnal answer", ["final answer"]),
    ("Łódź", ["Lodz", "Łódź"]),
    ("The Straße", ["strasse"]),
]


@pytest.mark.parametrize(("prediction", "golds"), CASES + UNICODE_CASES)
def test_squad_metrics_equal_the_official_script(prediction: str, golds: list[str]) -> None:
    """``squad_em`` / ``squad_f1`` are the official script's numbers, Unicode included (no folding)."""
    assert squad_em(prediction, golds) == float(squad_metric_max_over_ground_truths(squad_exact_match_score, prediction, golds))
    assert squad_f1(prediction, golds) == pytest.approx(squad_metric_max_over_ground_truths(squad_f1_score, prediction, golds))


def test_squad_metrics_do_not_fold_unicode() -> None:
    """Where the folded metrics call two spellings equal, the official ones do not."""
    assert exact_match("Türkiye", ["Turkiye"]) == 1.0 and squad_em("Türkiye", ["Turkiye"]) == 0.0
    assert exact_match("“Paris”", ["Paris"]) == 1.0 and squad_em("“Paris”", ["Paris"]) == 0.0
    assert f1_score("Beyoncé Knowles", ["Beyonce Knowles"]) == 1.0 and squad_f1("Beyoncé Knowles", ["Beyonce Knowles"]) == 0.5
    assert squad_f1("yes it is", ["yes"]) == 0.5 and f1_score("yes it is", ["yes"]) == 0.0  # no HotpotQA yes/no rule
    assert squad_em("x", []) == 0.0


@pytest.mark.parametrize("module", [deepresearcher.reward.metrics, deepresearcher.reward.format,
                                    deepresearcher.reward.outcome])
def test_doctests(module) -> None:
    """The examples in the docstrings are true."""
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
