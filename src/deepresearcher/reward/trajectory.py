"""One scorer for a whole rollout, shared by training and evaluation so they can never disagree.

The agent's prompt ends with ``<think>`` (the template prefills it), so the text a policy *wrote* is that
prefill followed by each sampled turn. Both the format gate and DeepResearcher's tag check run on that
text; checking the turns without the prefill would call every well-formed trajectory broken.

    reward.metric: deepresearcher   -> the original's training reward on the original's response text
                                       (``original_response``): its F1, or reward.format_penalty when its
                                       tag gate fails or it holds no answer; quirks and all (docs/reward.md)
    format gate fails               -> reward = reward.format_penalty (our gate; for ``deepresearcher_f1``
                                       the original evaluation script's gate on the last assistant turn)
    otherwise                       -> reward = the ``reward.metric`` entry of the metrics

The metrics are every name of ``ANSWER_METRICS``. All but ``deepresearcher_f1`` and ``deepresearcher_em``
score the answer our format check found; those two score the answer the original's evaluation script
took (the first ``<answer>`` of the last assistant turn, behind its tag gate), so they are comparable with
the paper's F1 and EM columns. ``RolloutScore.original_answer`` is that answer, the one the paper's judge saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from deepresearcher.config import RewardConfig
from deepresearcher.reward.deepresearcher import (
    ANSWER_SPLIT,
    ASSISTANT_TURN,
    deepresearcher_answer,
    deepresearcher_eval_answer,
    deepresearcher_f1,
)
from deepresearcher.reward.format import check_format
from deepresearcher.reward.outcome import ANSWER_METRICS, answer_metrics, is_unanswerable

__all__ = ["THINK_PREFILL", "RolloutScore", "original_response", "score_rollout"]

THINK_PREFILL = "<think>"
"""What the agent's chat template writes after the assistant's opening (``agent.template.THINK_OPEN``)."""

_ORIGINAL_EVAL = ("deepresearcher_f1", "deepresearcher_em")
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
    original_answer: str | None = None
    """The answer the original's evaluation script took (lower-cased; ``""`` is an answer); None when it took none."""


def original_response(rollout: _Rollout, prefill: str = THINK_PREFILL) -> str:
    """The response text the original's reward manager decoded: everything after its prompt.

    That is ``response_text`` (everything after the first assistant opening, the prefilled ``<think>`` included,
    decoded with its special tokens: turns, turn markers, observations). A trajectory without ``response_text`` (built by hand, or saved before the field existed) stands in
    with its turns alone, each opened as an assistant turn; its observations are then missing.
    """
    text = getattr(rollout, "response_text", "")
    if text:
        return text
    return "".join(f"{ASSISTANT_TURN}\n{prefill}{turn.text}" for turn in rollout.turns)


def score_rollout(
    rollout: _Rollout,
    golds: Sequence[str],
    *,
    answerable: bool | None = None,
    config: RewardConfig | None = None,
    prefill: str = THINK_PREFILL,
) -> RolloutScore:
    """Score a trajectory (anything with ``turns[i].text``, and ``response_text`` when it has one) against the golds.

    ``answerable=False`` marks a task without an answer; otherwise a task is unanswerable when its golds
    are all "cannot find" phrasings (``outcome.is_unanswerable``). ``reward.metric: deepresearcher`` knows
    no unanswerable tasks, as the original did not.
    """
    config = config or _DEFAULT_CONFIG
    texts = [prefill + turn.text for turn in rollout.turns]
    phrases = config.unanswerable_phrases
    unanswerable = answerable is False or is_unanswerable(golds, phrases)
    check = check_format(texts)
    ours = [name for name in ANSWER_METRICS if name not in _ORIGINAL_EVAL]
    metrics = answer_metrics(check.answer, golds, unanswerable=unanswerable, phrases=phrases, names=ours)
    response = original_response(rollout, prefill)
    original, original_reason = deepresearcher_eval_answer(response)
    metrics.update(answer_metrics(original, golds, unanswerable=unanswerable, phrases=phrases, names=_ORIGINAL_EVAL))
    ordered = {name: metrics[name] for name in ANSWER_METRICS}
    if config.metric == "deepresearcher":  # the training reward: the whole response, no unanswerable rule
        trained, reason = deepresearcher_answer(response)
        ok = trained is not None
        reward = deepresearcher_f1(trained, ANSWER_SPLIT.join(golds)) if trained is not None else config.format_penalty
    elif config.metric == "deepresearcher_f1":
        ok, reason = original is not None, original_reason
        reward = metrics[config.metric] if ok else config.format_penalty
    else:
        ok, reason = check.ok, check.reason
        reward = metrics[config.metric] if ok else config.format_penalty
    return RolloutScore(float(reward), ok, reason, check.answer, unanswerable, ordered, original)
