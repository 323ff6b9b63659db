"""One scorer for a whole rollout, shared by training and evaluation so they can never disagree.

The agent's prompt ends with ``<think>`` (the template prefills it), so the text a policy *wrote* is that
prefill followed by each sampled turn. Both the format gate and DeepResearcher's tag check run on that
text; checking the turns without the prefill would call every well-formed trajectory broken.

    reward.metric: deepresearcher   -> the original's training reward on the original's response text
                                       (``original_response``): its F1, or reward.format_penalty when its
                                       tag gate fails or it holds no answer; quirks and all (docs/reward.md)
    format gate fails               -> reward = reward.format_penalty (our gate; for ``deepresearcher_f1``
                                       the original evaluation script's gate on the last assistant turn)
    reward.metric: judge, f1+judge  -> unanswerable tasks: the abstention rule, no call; otherwise the judge's
                                       verdict on our answer (1 correct, 0 not or undecided), alone or weighted
                                       with F1 (``reward.judge_weight``); ``score_rollouts`` judges a batch at once
    otherwise                       -> reward = the ``reward.metric`` entry of the metrics

The metrics are every name of ``ANSWER_METRICS``. All but ``deepresearcher_f1`` and ``deepresearcher_em``
score the answer our format check found; those two score the answer the original's evaluation script
took (the first ``<answer>`` of the last assistant turn, behind its tag gate), so they are comparable with
the paper's F1 and EM columns. ``RolloutScore.original_answer`` is that answer, the one the paper's judge saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
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
from deepresearcher.reward.judge import Verdict
from deepresearcher.reward.judged import JUDGE_METRICS, JudgeRequest, RewardJudge, reward_judge
from deepresearcher.reward.outcome import ANSWER_METRICS, answer_metrics, is_unanswerable

__all__ = ["THINK_PREFILL", "RolloutScore", "ascore_rollouts", "original_response", "score_rollout", "score_rollouts"]

THINK_PREFILL = "<think>"
"""What the agent's chat template writes after the assistant's opening (``agent.template.THINK_OPEN``)."""

_ORIGINAL_EVAL = ("deepresearcher_f1", "deepresearcher_em")
_DEFAULT_CONFIG = RewardConfig()


class _Turn(Protocol):
    text: str


class _Rollout(Protocol):
    @property
    def turns(self) -> Sequence[_Turn]: ...


_UNDECIDED = ("unparsed", "error")
"""How a verdict ends that the judge never gave: counted as incorrect, and in ``reward_judge_failed``."""


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
    question: str | None = None,
    judge: RewardJudge | None = None,
) -> RolloutScore:
    """Score a trajectory (anything with ``turns[i].text``, and ``response_text`` when it has one) against the golds.

    ``answerable=False`` marks a task without an answer; otherwise a task is unanswerable when its golds
    are all "cannot find" phrasings (``outcome.is_unanswerable``). ``reward.metric: deepresearcher`` knows
    no unanswerable tasks, as the original did not. A judge metric asks ``judge`` (default: the process's,
    ``judged.reward_judge``) about ``question`` (default: the trajectory's own ``question``), a batch of one;
    ``score_rollouts`` asks a whole batch at once.
    """
    config = config or _DEFAULT_CONFIG
    if config.metric in JUDGE_METRICS:
        return score_rollouts([rollout], [golds], answerable=[answerable], questions=[question], config=config,
                              prefill=prefill, judge=judge)[0]
    return _score(rollout, golds, answerable, config, prefill)


def score_rollouts(
    rollouts: Sequence[_Rollout],
    golds: Sequence[Sequence[str]],
    *,
    answerable: Sequence[bool | None] | None = None,
    questions: Sequence[str | None] | None = None,
    config: RewardConfig | None = None,
    prefill: str = THINK_PREFILL,
    judge: RewardJudge | None = None,
) -> list[RolloutScore]:
    """``score_rollout`` of each rollout (the lists aligned); a judge metric's verdicts are asked as one batch."""
    config = config or _DEFAULT_CONFIG
    scored, asked = _plan(rollouts, golds, answerable, questions, config, prefill)
    if not asked:
        return scored
    verdicts = (judge or reward_judge(config)).verdicts([request for _, request in asked])
    return _judged(scored, asked, verdicts, config)


async def ascore_rollouts(
    rollouts: Sequence[_Rollout],
    golds: Sequence[Sequence[str]],
    *,
    answerable: Sequence[bool | None] | None = None,
    questions: Sequence[str | None] | None = None,
    config: RewardConfig | None = None,
    prefill: str = THINK_PREFILL,
    judge: RewardJudge | None = None,
) -> list[RolloutScore]:
    """``score_rollouts`` for a caller on an event loop: it keeps running while the judge works."""
    config = config or _DEFAULT_CONFIG
    scored, asked = _plan(rollouts, golds, answerable, questions, config, prefill)
    if not asked:
        return scored
    verdicts = await (judge or reward_judge(config)).averdicts([request for _, request in asked])
    return _judged(scored, asked, verdicts, config)


def _plan(
    rollouts: Sequence[_Rollout],
    golds: Sequence[Sequence[str]],
    answerable: Sequence[bool | None] | None,
    questions: Sequence[str | None] | None,
    config: RewardConfig,
    prefill: str,
) -> tuple[list[RolloutScore], list[tuple[int, JudgeRequest]]]:
    """Every rollout's score but the judge's part, and the answers the judge must see (by rollout index)."""
    n = len(rollouts)
    answerable = [None] * n if answerable is None else answerable
    questions = [None] * n if questions is None else questions
    lengths = {"rollouts": n, "golds": len(golds), "answerable": len(answerable), "questions": len(questions)}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"score_rollouts needs aligned lists of one length; got lengths {lengths}.")
    scored = [_score(r, g, a, config, prefill) for r, g, a in zip(rollouts, golds, answerable)]
    if config.metric not in JUDGE_METRICS:
        return scored, []
    asked = []
    for i, (score, rollout, gold, question) in enumerate(zip(scored, rollouts, golds, questions)):
        if score.format_ok and not score.unanswerable and score.answer is not None:
            question = question if question is not None else getattr(rollout, "question", "")
            if not question:
                raise ValueError(f"reward.metric={config.metric} judges an answer against its question: pass "
                                 "questions=[...] (question=...) or trajectories that carry their question.")
            asked.append((i, JudgeRequest(question, score.answer, tuple(gold))))
    return scored, asked


def _judged(scored: list[RolloutScore], asked: list[tuple[int, JudgeRequest]], verdicts: Sequence[Verdict],
            config: RewardConfig) -> list[RolloutScore]:
    """``scored`` with a judge metric's reward and its two metrics: ``reward_judge`` (the verdict the reward used:
    1 correct, 0 otherwise; on an unanswerable task the abstention rule; 0 on a broken format) and
    ``reward_judge_failed`` (1 when the judge gave no verdict: a reply it never could parse, or a failed call)."""
    by_index = {i: v for (i, _), v in zip(asked, verdicts, strict=True)}
    out = []
    for i, score in enumerate(scored):
        verdict = by_index.get(i)
        judged = float(verdict.correct) if verdict is not None else score.metrics["em"] if score.format_ok else 0.0
        failed = float(verdict is not None and verdict.by in _UNDECIDED)
        if not score.format_ok:
            reward = config.format_penalty
        elif config.metric == "judge":
            reward = judged
        else:
            reward = (1.0 - config.judge_weight) * score.metrics["f1"] + config.judge_weight * judged
        metrics = {**score.metrics, "reward_judge": judged, "reward_judge_failed": failed}
        out.append(replace(score, reward=float(reward), metrics=metrics))
    return out


def _score(rollout: _Rollout, golds: Sequence[str], answerable: bool | None, config: RewardConfig,
           prefill: str) -> RolloutScore:
    """The pure part of the score: gate, answer, metrics and, for a metric that is not a judge's, the reward."""
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
        named = "f1" if config.metric in JUDGE_METRICS else config.metric  # a judge metric's reward: ``_judged``
        reward = metrics[named] if ok else config.format_penalty
    return RolloutScore(float(reward), ok, reason, check.answer, unanswerable, ordered, original)
