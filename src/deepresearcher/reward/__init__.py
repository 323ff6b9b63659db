"""Rewards and answer metrics: folded and official SQuAD EM/F1, DeepResearcher's reward, F1 and EM, format checks,
the judge reward, one scorer.

The metrics are pure functions: no model, no network. ``score_rollout`` is the one place a trajectory becomes a
reward and metrics, for training and evaluation alike; only the judge metrics (``reward.metric: judge``,
``f1+judge``) reach a model, through ``judge`` (the evaluation's prompts) and ``judged`` (batched, cached verdicts).
"""

from deepresearcher.reward.deepresearcher import (
    ANSWER_SPLIT,
    deepresearcher_answer,
    deepresearcher_em,
    deepresearcher_eval_answer,
    deepresearcher_f1,
    deepresearcher_normalize,
    deepresearcher_reward,
    split_golds,
    tags_balanced,
)
from deepresearcher.reward.format import FormatCheck, check_format, extract_answer
from deepresearcher.reward.metrics import (
    cover_em,
    exact_match,
    f1_score,
    normalize_answer,
    squad_em,
    squad_f1,
    squad_normalize,
    token_f1,
)
from deepresearcher.reward.outcome import (
    ANSWER_METRICS,
    UNANSWERABLE_GOLD,
    answer_metrics,
    is_unanswerable,
    says_cannot_find,
    score,
    score_batch,
)
from deepresearcher.reward.judge import Judge, Verdict
from deepresearcher.reward.judged import JUDGE_METRICS, JudgeRequest, RewardJudge, close_reward_judges, reward_judge
from deepresearcher.reward.trajectory import (
    THINK_PREFILL,
    RolloutScore,
    ascore_rollouts,
    original_response,
    score_rollout,
    score_rollouts,
)

__all__ = [
    "ANSWER_METRICS",
    "ANSWER_SPLIT",
    "JUDGE_METRICS",
    "THINK_PREFILL",
    "UNANSWERABLE_GOLD",
    "FormatCheck",
    "Judge",
    "JudgeRequest",
    "RewardJudge",
    "RolloutScore",
    "Verdict",
    "answer_metrics",
    "ascore_rollouts",
    "check_format",
    "close_reward_judges",
    "cover_em",
    "deepresearcher_answer",
    "deepresearcher_em",
    "deepresearcher_eval_answer",
    "deepresearcher_f1",
    "deepresearcher_normalize",
    "deepresearcher_reward",
    "exact_match",
    "extract_answer",
    "f1_score",
    "is_unanswerable",
    "normalize_answer",
    "original_response",
    "reward_judge",
    "says_cannot_find",
    "score",
    "score_batch",
    "score_rollout",
    "score_rollouts",
    "split_golds",
    "squad_em",
    "squad_f1",
    "squad_normalize",
    "tags_balanced",
    "token_f1",
]
