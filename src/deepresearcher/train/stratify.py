"""Held-out sets with as many tasks of every type, so that each per-type figure is measured, not guessed.

A random draw mirrors the world's mix: 1,000 tasks of the quickstart's test world held 41 ``comparison``
and 18 ``unanswerable`` tasks, whose F1 then carried standard errors of 5-11 points, while the two-page
types are the ones that say most about research. :func:`stratify` takes the same number of tasks of each
type instead (``train.eval_per_type``); ``train.tasks`` pools further unseen worlds when the held-out
world has too few of a type.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

# The two overall rows of a summary by task type (``heldout.EvalResult.by_type``): every task weighs the
# same, or every task type does (the mean of the types' figures).
ALL = "all"
TYPE_MEAN = "type_mean"


def per_type_quota(per_type: int, total: int, types: int) -> int:
    """Tasks of each type: ``per_type``, unless ``total`` tasks (``train.eval_tasks``) are fewer in all."""
    return min(per_type, math.ceil(total / max(types, 1)))


def short_types(tasks: Iterable[dict[str, Any]], quota: int, types: Iterable[str]) -> dict[str, int]:
    """The ``types`` with fewer than ``quota`` tasks among ``tasks``, and how many they have."""
    counts = Counter(task.get("type", "task") for task in tasks)
    return {kind: counts[kind] for kind in types if counts[kind] < quota}


def stratify(tasks: list[dict[str, Any]], quota: int) -> list[dict[str, Any]]:
    """The first ``quota`` tasks of each type in their given (shuffled) order, interleaved one type after the
    other (types by name), so that any cut of the list's head stays balanced too."""
    by_type: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        group = by_type.setdefault(task.get("type", "task"), [])
        if len(group) < quota:
            group.append(task)
    groups = [by_type[kind] for kind in sorted(by_type)]
    return [group[i] for i in range(quota) for group in groups if i < len(group)]


def balanced_cycle(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """As many tasks as ``tasks``, one type after the other (types by name), each type's tasks in their given
    (shuffled) order and started over when they run out: GRPO prompts with every type as frequent
    (``train.prompt_mix: balanced``). A rare type's tasks recur, as every prompt does over epochs; each task
    carries ``repeat`` (0 the first time), so what fits on training tasks counts each one once."""
    by_type: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        by_type.setdefault(task.get("type", "task"), []).append(task)
    groups = [by_type[kind] for kind in sorted(by_type)]
    picked = []
    for i in range(len(tasks)):
        group, turn = groups[i % len(groups)], i // len(groups)
        picked.append({**group[turn % len(group)], "repeat": turn // len(group)})
    return picked

