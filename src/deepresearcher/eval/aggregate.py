"""From scored rollouts to the report's numbers: mean@k, pass@k, per benchmark and averaged.

With ``k`` samples per question, ``mean@k`` is the metric averaged over every sample (the expected
score of one rollout) and ``pass@k`` the chance that at least one of ``k`` samples is correct, from the
unbiased estimator of Chen et al. (2021) on the ``n`` samples actually run: ``1 - C(n-c, k) / C(n, k)``.
With one sample both equal the plain mean. The average row is the unweighted mean over benchmarks,
as the paper's "Avg." column; the judge's call counts are summed instead.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from math import comb
from typing import Any

__all__ = ["JUDGE_COUNTS", "METRICS", "PASS_METRICS", "pass_at_k", "summarize"]

METRICS: tuple[str, ...] = (
    "em", "f1", "cover_em", "squad_em", "squad_f1", "deepresearcher_em", "deepresearcher_f1", "mbe", "judge",
)
"""Columns of the report (``reward.ANSWER_METRICS``, the paper's MBE and the judge); ``mbe`` and ``judge`` are
None (not reported) when no judge model was configured, and a metric that older records lack is None too."""
PASS_METRICS: tuple[str, ...] = ("em", "cover_em", "squad_em", "deepresearcher_em", "mbe", "judge")
"""Binary metrics that have a pass@k (F1 is graded, so it only has mean@k)."""
JUDGE_COUNTS: tuple[str, ...] = ("judge_asked", "judge_unparsed")
"""Judge calls and replies without a verdict, summed per benchmark and overall (None without a judge)."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of ``k`` samples drawn from ``n`` (``c`` correct) is correct.

    >>> pass_at_k(10, 0, 5), pass_at_k(10, 10, 1), pass_at_k(4, 1, 2), pass_at_k(5, 2, 1)
    (0.0, 1.0, 0.5, 0.4)
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (got n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _benchmark_row(records: list[dict[str, Any]], k: int) -> dict[str, Any]:
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_task[r["task_id"]].append(r)
    row: dict[str, Any] = {"questions": len(by_task), "rollouts": len(records)}
    for metric in METRICS:
        values = [float(r[metric]) for r in records if r.get(metric) is not None]
        row[metric] = _mean(values) if len(values) == len(records) else None
    if k > 1:
        for metric in PASS_METRICS:
            if row[metric] is None:
                row[f"pass@{k}_{metric}"] = None
                continue
            per_task = []
            for samples in by_task.values():
                n, c = len(samples), sum(1 for s in samples if float(s[metric]) >= 1.0)
                per_task.append(pass_at_k(n, c, min(k, n)))
            row[f"pass@{k}_{metric}"] = _mean(per_task)
    for key in JUDGE_COUNTS:
        counts = [r.get(key) for r in records]
        row[key] = None if any(c is None for c in counts) else sum(counts)
    row["answered"] = _mean([float(r.get("answer") is not None) for r in records])
    row["format_ok"] = _mean([float(bool(r.get("format_ok"))) for r in records])
    row["turns"] = _mean([float(r.get("turns", 0)) for r in records])
    row["seconds"] = _mean([float(r.get("seconds", 0.0)) for r in records])
    return row


def summarize(records: Iterable[dict[str, Any]], k: int, order: list[str] | None = None) -> dict[str, Any]:
    """``{"benchmarks": {name: row}, "average": row}``; rows hold mean@k metrics, pass@k and rollout stats.

    ``order`` fixes the benchmarks' order (the command line's); others follow alphabetically.
    """
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        grouped[r["benchmark"]].append(r)
    names = [b for b in (order or []) if b in grouped] + sorted(b for b in grouped if b not in (order or []))
    rows = {name: _benchmark_row(grouped[name], k) for name in names}
    average: dict[str, Any] = {"questions": sum(r["questions"] for r in rows.values()),
                               "rollouts": sum(r["rollouts"] for r in rows.values())}
    keys = [key for key in (next(iter(rows.values()), {})) if key not in ("questions", "rollouts")]
    for key in keys:
        values = [row[key] for row in rows.values()]
        total = sum if key in JUDGE_COUNTS else _mean
        average[key] = None if any(v is None for v in values) else total(values)
    return {"benchmarks": rows, "average": average}
