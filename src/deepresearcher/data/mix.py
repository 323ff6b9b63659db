"""Training mixes: sample benchmarks by ratio, never training on a question that is evaluated.

The paper trains on NQ : TriviaQA : HotpotQA : 2Wiki = 1 : 1 : 3 : 3 (``PAPER_RATIOS``). A mix is
built in four deterministic steps:

1. drop every question whose normalized text equals an evaluation question (any benchmark, any split);
2. drop repeats of a question already kept (within and across pools, pools taken in name order);
3. shuffle each pool with a seed derived from ``seed`` and the pool's name;
4. take ``total × ratio`` questions from each (largest-remainder rounding, so counts sum to ``total``)
   and shuffle the result with ``seed``.

Without ``total``, the largest mix the pools can fill at the exact ratios is built.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from deepresearcher.data.schema import QATask
from deepresearcher.errors import DataError
from deepresearcher.reward.metrics import normalize_answer

__all__ = ["PAPER_RATIOS", "MixReport", "allocate", "make_mix", "question_key"]

PAPER_RATIOS: dict[str, float] = {"nq": 1, "tq": 1, "hotpotqa": 3, "2wiki": 3}


def question_key(question: str) -> str:
    """The text two questions must share to count as the same (SQuAD normalization of the question).

    >>> question_key("Who wrote 'The Raven'?") == question_key("who wrote the raven")
    True
    """
    return normalize_answer(question)


@dataclass
class MixReport:
    """What a mix took from each pool, and what it dropped and why."""

    ratios: dict[str, float]
    counts: dict[str, int] = field(default_factory=dict)
    available: dict[str, int] = field(default_factory=dict)
    dropped_eval_overlap: dict[str, int] = field(default_factory=dict)
    dropped_duplicates: dict[str, int] = field(default_factory=dict)
    seed: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def allocate(total: int, ratios: Mapping[str, float]) -> dict[str, int]:
    """Split ``total`` by ``ratios`` with largest-remainder rounding (ties broken by name).

    >>> allocate(10, {"nq": 1, "tq": 1, "hotpotqa": 3, "2wiki": 3})
    {'2wiki': 4, 'hotpotqa': 4, 'nq': 1, 'tq': 1}
    """
    weight_sum = sum(ratios.values())
    exact = {name: total * r / weight_sum for name, r in sorted(ratios.items())}
    counts = {name: math.floor(x) for name, x in exact.items()}
    leftover = total - sum(counts.values())
    by_remainder = sorted(exact, key=lambda name: (-(exact[name] - counts[name]), name))
    for name in by_remainder[:leftover]:
        counts[name] += 1
    return counts


def make_mix(
    pools: Mapping[str, Sequence[QATask]],
    ratios: Mapping[str, float],
    *,
    total: int | None = None,
    exclude: Iterable[QATask | str] = (),
    seed: int = 0,
) -> tuple[list[QATask], MixReport]:
    """Sample a deduplicated training mix from ``pools`` (name -> tasks) by ``ratios`` (name -> weight).

    ``exclude`` holds the evaluation questions (tasks or question strings) that must not appear.
    """
    ratios = {name: float(r) for name, r in ratios.items() if r > 0}
    if not ratios:
        raise DataError("A mix needs at least one positive ratio, e.g. nq=1,tq=1,hotpotqa=3,2wiki=3.")
    missing = sorted(set(ratios) - set(pools))
    if missing:
        raise DataError(f"No pool of tasks for {', '.join(missing)}; load them or drop them from the ratios.")
    banned = {question_key(e.question if isinstance(e, QATask) else e) for e in exclude}
    report = MixReport(ratios=ratios, seed=seed)
    seen: set[str] = set()
    kept: dict[str, list[QATask]] = {}
    for name in sorted(ratios):
        kept[name] = []
        overlap = duplicates = 0
        for task in pools[name]:
            key = question_key(task.question)
            if key in banned:
                overlap += 1
            elif key in seen:
                duplicates += 1
            else:
                seen.add(key)
                kept[name].append(task)
        random.Random(f"{seed}:{name}").shuffle(kept[name])
        report.available[name] = len(kept[name])
        report.dropped_eval_overlap[name] = overlap
        report.dropped_duplicates[name] = duplicates
    weight_sum = sum(ratios.values())
    if total is None:
        total = min(math.floor(len(kept[n]) * weight_sum / r + 1e-9) for n, r in ratios.items())
    if total <= 0:
        raise DataError(
            f"The mix would be empty: after deduplication the pools hold {report.available} questions "
            f"(dropped as evaluation questions: {report.dropped_eval_overlap})."
        )
    counts = allocate(total, ratios)
    short = {n: (c, len(kept[n])) for n, c in counts.items() if c > len(kept[n])}
    if short:
        detail = ", ".join(f"{n} needs {c} but has {a} after deduplication" for n, (c, a) in short.items())
        raise DataError(f"Not enough questions for a mix of {total}: {detail}. Lower --total or add data.")
    report.counts = counts
    mix = [task for name in sorted(counts) for task in kept[name][: counts[name]]]
    random.Random(seed).shuffle(mix)
    return mix, report
