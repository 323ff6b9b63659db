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


@dataclass
class EvalResult:
    """Per-task scores of one evaluation and their summary by task type."""

    rows: list[dict[str, Any]] = field(default_factory=list)

    def by_type(self) -> dict[str, dict[str, float]]:
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in self.rows:
            groups[row["type"]].append(row)
            groups["all"].append(row)
        return {name: _summary(rows) for name, rows in sorted(groups.items(), key=lambda kv: (kv[0] == "all", kv[0]))}

    def behaviours_by_type(self) -> dict[str, dict[str, dict[str, Any]]]:
        """The research behaviours (``eval.behaviours``: rate and cases) per task type, then ``all``."""
        from deepresearcher.eval.behaviours import rates_by_type

        return rates_by_type(row["behaviour"] for row in self.rows if row.get("behaviour"))


def _summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    n = len(rows)
    f1 = [r["f1"] for r in rows]
    mean = sum(f1) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in f1) / max(n - 1, 1))
    return {
        "n": n,
        "success": sum(r["f1"] >= 0.999 for r in rows) / n,
        "f1": mean,
        "f1_se": std / math.sqrt(n),
        "format_errors": sum(r["format_error"] for r in rows) / n,
        "tool_calls": sum(r["tool_calls"] for r in rows) / n,
    }


def evaluate(
    model_dir: Path, tasks: list[dict[str, Any]], rollouts: Any, config: Config, batch: int = 256
) -> EvalResult:
    """Episodes of the model in ``model_dir`` on ``tasks`` as ``eval`` runs them (``eval.temperature``, greedy
    by default), scored like RL rewards."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir)).eval()
    return evaluate_model(model, tokenizer, tasks, rollouts, config, batch)


def evaluate_model(
    model: Any, tokenizer: Any, tasks: list[dict[str, Any]], rollouts: Any, config: Config, batch: int = 256
) -> EvalResult:
    """:func:`evaluate` with a loaded model (the trainer's live policy during training)."""
    import torch

    from deepresearcher.train.quickstart_report import heldout_row
    from deepresearcher.train.rollout import score_trajectory

    result = EvalResult()
    with torch.no_grad():
        for start in range(0, len(tasks), batch):
            chunk = tasks[start : start + batch]
            for task, trajectory in zip(chunk, rollouts.collect(chunk, model, tokenizer, decoding="eval"), strict=True):
                result.rows.append(heldout_row(task, trajectory, score_trajectory(trajectory, task, config)))
    return result


def paired_gain(before: EvalResult, after: EvalResult) -> tuple[float, float]:
    """Mean F1 gain (after − before) over the same tasks, and its standard error (paired)."""
    a = {r["id"]: r["f1"] for r in before.rows}
    diffs = [r["f1"] - a[r["id"]] for r in after.rows if r["id"] in a]
    n = len(diffs)
    mean = sum(diffs) / n
    std = math.sqrt(sum((d - mean) ** 2 for d in diffs) / max(n - 1, 1))
    return mean, std / math.sqrt(n)
