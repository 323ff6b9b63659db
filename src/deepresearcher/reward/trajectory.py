"""One scorer for a whole rollout, shared by training and evaluation so they can never disagree.

The agent's prompt ends with ``<think>`` (the template prefills it), so the text a policy *wrote* is that
prefill followed by each sampled turn. Both the format gate and DeepResearcher's tag check run on that
text; checking the turns without the prefill would call every well-formed trajectory broken.

    format gate (ours, or the original's tag check for ``reward.metric: deepresearcher_f1``) fails
                                          -> reward = reward.format_penalty, every metric 0
    otherwise                             -> reward = the ``reward.metric`` entry of the metrics

The metrics are every name of ``ANSWER_METRICS``. All but ``deepresearcher_f1`` score the answer our
format check found; ``deepresearcher_f1`` scores the first ``<answer>`` behind the original's own gate,
as its evaluation script did, so it is comparable with the paper's F1 column.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from deepresearcher.config import RewardConfig
from deepresearcher.reward.deepresearcher import deepresearcher_answer
from deepresearcher.reward.format import check_format
from deepresearcher.reward.outcome import ANSWER_METRICS, answer_metrics, is_unanswerable

__all__ = ["THINK_PREFILL", "RolloutScore", "score_rollout"]

THINK_PREFILL = "<think>"
"""What the agent's chat template writes after the assistant's opening (``agent.template.THINK_OPEN``)."""

_DR_METRIC = "deepresearcher_f1"
_DEFAULT_CONFIG = RewardConfig()


class _Turn(Protocol):
    text: str


class _Rollout(Protocol):
    @property
    def turns(self) -> Sequence[_Turn]: ...


@dataclass(frozen=True)
class RolloutScore:
    """The verdict on one rollout: reward, format gate, the scored answer, and every answer metric."""

    reward: float
    format_ok: bool
    format_reason: str | None
    answer: str | None
    """The answer our format check found; None when the format is broken."""
    unanswerable: bool
    metrics: dict[str, float] = field(default_factory=dict)


def score_rollout(
    rollout: _Rollout,
    golds: Sequence[str],
    *,
    answerable: bool | None = None,
    config: RewardConfig | None = None,
    prefill: str = THINK_PREFILL,
) -> RolloutScore:
    """Score a trajectory (anything with ``turns[i].text``) against the gold aliases.

    ``answerable=False`` marks a task without an answer; otherwise a task is unanswerable when its golds
    are all "cannot find" phrasings (``outcome.is_unanswerable``).
    """
    config = config or _DEFAULT_CONFIG
    texts = [prefill + turn.text for turn in rollout.turns]
    phrases = config.unanswerable_phrases
    unanswerable = answerable is False or is_unanswerable(golds, phrases)
    check = check_format(texts)
    ours = [name for name in ANSWER_METRICS if name != _DR_METRIC]
    metrics = answer_metrics(check.answer, golds, unanswerable=unanswerable, phrases=phrases, names=ours)
    dr_answer, dr_reason = deepresearcher_answer("".join(texts))
    metrics.update(answer_metrics(dr_answer, golds, unanswerable=unanswerable, phrases=phrases, names=(_DR_METRIC,)))
    ok, reason = (dr_answer is not None, dr_reason) if config.metric == _DR_METRIC else (check.ok, check.reason)
    reward = metrics[config.metric] if ok else float(config.format_penalty)
    ordered = {name: metrics[name] for name in ANSWER_METRICS}
    return RolloutScore(reward, ok, reason, check.answer, unanswerable, ordered)
