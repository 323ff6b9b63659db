"""Rewards and answer metrics: EM / F1 / cover-EM, the paper's format check and outcome reward.

Pure functions: nothing here touches a model or the network.
"""

from deepresearcher.reward.format import FormatCheck, check_format, extract_answer
from deepresearcher.reward.metrics import cover_em, exact_match, f1_score, normalize_answer, token_f1
from deepresearcher.reward.outcome import (
    UNANSWERABLE_GOLD,
    answer_metrics,
    is_unanswerable,
    says_cannot_find,
    score,
    score_batch,
)

__all__ = [
    "UNANSWERABLE_GOLD",
    "FormatCheck",
    "answer_metrics",
    "check_format",
    "cover_em",
    "exact_match",
    "extract_answer",
    "f1_score",
    "is_unanswerable",
    "normalize_answer",
    "says_cannot_find",
    "score",
    "score_batch",
    "token_f1",
]
