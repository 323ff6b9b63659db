"""Held-out evaluation of a checkpoint during training: episodes as ``eval`` runs them, scored like rewards.

The quickstart evaluates after SFT and after GRPO; ``train`` evaluates on ``train.eval_data`` every
``train.eval_every`` steps with the live policy and its final policy after training. Rows are per task (``id``, ``type``, reward, F1, ...), summarized by task type.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepresearcher.config import Config
from deepresearcher.train.stratify import ALL, TYPE_MEAN

_TURN_FIELDS = {"text": True, "format_error": True, "tool_call": {"name", "arguments", "observation", "error"}}


def heldout_row(task: dict[str, Any], trajectory: Any, scores: dict[str, Any]) -> dict[str, Any]:
    """One held-out episode: id, type and scores, then the question, golds, answer and turns (tool calls included),
    and its research behaviours (``eval.behaviours``)."""
    from deepresearcher.eval.behaviours import behaviour_record

    return {
        "id": task["id"], "type": task.get("type", "task"), **scores,
        "question": task["question"], "golds": list(task.get("golds", [])), "answer": trajectory.answer,
        "termination": trajectory.termination,
        "turns": [turn.model_dump(mode="json", include=_TURN_FIELDS) for turn in trajectory.turns],
        "behaviour": behaviour_record(trajectory, task).to_dict(),
    }


@dataclass
class EvalResult:
    """Per-task scores of one evaluation and their summary by task type."""

    rows: list[dict[str, Any]] = field(default_factory=list)

    def by_type(self) -> dict[str, dict[str, float]]:
        """Each task type's figures with their standard errors, then ``type_mean`` (the mean of the types'
        figures: each type weighs the same, as on a stratified held-out set) and ``all`` (each task weighs the
        same). With one type there is no ``type_mean``."""
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in self.rows:
            groups[row["type"]].append(row)
        types = {name: _summary(rows) for name, rows in sorted(groups.items())}
        overall = {TYPE_MEAN: type_mean(list(types.values()))} if len(types) > 1 else {}
        return {**types, **overall, ALL: _summary(self.rows)}

    def behaviours_by_type(self) -> dict[str, dict[str, dict[str, Any]]]:
        """The research behaviours (``eval.behaviours``: rate and cases) per task type, then ``all``."""
        from deepresearcher.eval.behaviours import rates_by_type

        return rates_by_type(row["behaviour"] for row in self.rows if row.get("behaviour"))


def mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and standard error of the mean (sample standard deviation / sqrt(n); 0 for one value)."""
    n = len(values)
    mean = sum(values) / n
    return mean, math.sqrt(sum((x - mean) ** 2 for x in values) / max(n - 1, 1)) / math.sqrt(n)


def rate_se(rate: float, n: int) -> float:
    """Binomial standard error of a rate measured on ``n`` tasks: sqrt(p (1 - p) / n)."""
    return math.sqrt(rate * (1 - rate) / n)


def _summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    n = len(rows)
    f1, f1_se = mean_se([r["f1"] for r in rows])
    tools, tools_se = mean_se([r["tool_calls"] for r in rows])
    success = sum(r["f1"] >= 0.999 for r in rows) / n
    errors = sum(r["format_error"] for r in rows) / n
    return {
        "n": n,
        "success": success,
        "success_se": rate_se(success, n),
        "f1": f1,
        "f1_se": f1_se,
        "format_errors": errors,
        "format_errors_se": rate_se(errors, n),
        "tool_calls": tools,
        "tool_calls_se": tools_se,
    }


def type_mean(summaries: list[dict[str, float]]) -> dict[str, float]:
    """The mean of per-type summaries, each type weighing the same; the standard error of each mean is
    sqrt(sum of the types' squared SEs) / types (independent samples), ``n`` the tasks in all."""
    out: dict[str, float] = {"n": sum(s["n"] for s in summaries)}
    for key in summaries[0]:
        if key == "n" or key.endswith("_se"):
            continue
        out[key] = sum(s[key] for s in summaries) / len(summaries)
        if f"{key}_se" in summaries[0]:
            out[f"{key}_se"] = math.sqrt(sum(s[f"{key}_se"] ** 2 for s in summaries)) / len(summaries)
    return out


def evaluate(
    model_dir: Path, tasks: list[dict[str, Any]], rollouts: Any, config: Config
) -> EvalResult:
    """Episodes of the model in ``model_dir`` on ``tasks`` as ``eval`` runs them (``eval.temperature``, greedy
    by default), scored like RL rewards. The model is loaded for inference on the process's device
    (``inference.loader``), a copy of its own: the directory is a run's output, evaluated once."""
    from deepresearcher.inference.loader import load_checkpoint

    model, tokenizer = load_checkpoint(model_dir, shared=False)
    return evaluate_model(model, tokenizer, tasks, rollouts, config)


def evaluate_model(
    model: Any, tokenizer: Any, tasks: list[dict[str, Any]], rollouts: Any, config: Config, *, vllm_llm: Any = None
) -> EvalResult:
    """:func:`evaluate` with a loaded model (the trainer's live policy during training), or with ``vllm_llm`` (the
    trainer's colocated ``vllm.LLM`` holding the same weights, ``train.use_vllm``) decoding its turns.

    The episodes run as one batch: all start together into one engine, which admits turns as they come
    (``agent.max_concurrent_generations`` in flight per environment), so no episode waits for a chunk's slowest."""
    import torch

    from deepresearcher.train.rollout import score_trajectories

    result = EvalResult()
    with torch.no_grad():
        trajectories = rollouts.collect(tasks, model, tokenizer, vllm_llm=vllm_llm, decoding="eval")
    scores = score_trajectories(trajectories, tasks, config)
    for task, trajectory, score in zip(tasks, trajectories, scores, strict=True):
        result.rows.append(heldout_row(task, trajectory, score))
    return result


def paired_gain(before: EvalResult, after: EvalResult, kind: str | None = None) -> tuple[float, float]:
    """Mean F1 gain (after − before) over the same tasks (of task type ``kind``, or all), and its standard
    error (paired)."""
    a = {r["id"]: r["f1"] for r in before.rows}
    return mean_se([r["f1"] - a[r["id"]] for r in after.rows if r["id"] in a and kind in (None, r["type"])])


def paired_gain_by_type(before: EvalResult, after: EvalResult) -> dict[str, tuple[float, float]]:
    """:func:`paired_gain` of each task type, then ``type_mean`` (the types' mean gain, SE as in
    :func:`type_mean`) and ``all`` (over every task)."""
    types = sorted({r["type"] for r in after.rows})
    gains = {kind: paired_gain(before, after, kind) for kind in types}
    if len(types) > 1:
        gains[TYPE_MEAN] = (sum(g for g, _ in gains.values()) / len(types),
                            math.sqrt(sum(se**2 for _, se in gains.values())) / len(types))
    gains[ALL] = paired_gain(before, after)
    return gains
