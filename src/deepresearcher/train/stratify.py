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
    groups = [group[:quota] for group in _by_type(tasks).values()]
    return [group[i] for i in range(quota) for group in groups if i < len(group)]


def _by_type(tasks: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The tasks grouped by type, types by name, each group in the tasks' given order."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        groups.setdefault(task.get("type", "task"), []).append(task)
    return {kind: groups[kind] for kind in sorted(groups)}


def balanced_cycle(tasks: list[dict[str, Any]], length: int | None = None) -> list[dict[str, Any]]:
    """``length`` tasks (default: as many as ``tasks``), one type after the other (types by name), each type's
    tasks in their given (shuffled) order and started over when they run out: GRPO prompts with every type as
    frequent (``train.prompt_mix: balanced``). A rare type's tasks recur, as every prompt does over epochs;
    each task carries ``repeat`` (0 the first time), so what fits on training tasks counts each one once."""
    groups = list(_by_type(tasks).values())
    picked = []
    for i in range(len(tasks) if length is None else length):
        group, turn = groups[i % len(groups)], i // len(groups)
        picked.append({**group[turn % len(group)], "repeat": turn // len(group)})
    return picked


def balanced_split(tasks: list[dict[str, Any]], count: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``count`` SFT tasks with every type as frequent (``train.sft.task_mix: balanced``), and the tasks left for
    GRPO in their given order.

    A type gives SFT at most its share of ``count`` and at most half of its tasks, so a rare type (1.3% of a
    world is ``unanswerable``) is still among GRPO's prompts; its demonstrations recur instead (``repeat``),
    as a balanced GRPO order's prompts do."""
    groups = _by_type(tasks)
    share = math.ceil(count / max(len(groups), 1))
    kept = {kind: group[: min(share, math.ceil(len(group) / 2))] for kind, group in groups.items()}
    taken = {id(task) for group in kept.values() for task in group}
    return balanced_cycle([t for group in kept.values() for t in group], count), [t for t in tasks if id(t) not in taken]
