"""``deepresearcher eval --dry-run``: check every question of an eval before any model runs.

A bad row found after an hour of rollouts wastes the hour; this reads every row the eval would run,
converts it to a ``QATask`` and reports every problem at once (not just the first): rows that do not
convert, duplicate ids within a benchmark, questions without a usable gold answer (one that
normalizes to nothing), unknown benchmarks. Nothing is loaded but the data files.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepresearcher.config import Config
from deepresearcher.data import QATask, read_records, record_to_task
from deepresearcher.errors import DeepResearcherError
from deepresearcher.reward import normalize_answer

__all__ = ["DryRunReport", "dry_run"]

_MAX_PROBLEMS = 50


@dataclass
class DryRunReport:
    """Rows read, rows valid, questions per benchmark and the problems found (first 50 kept)."""

    rows: int = 0
    valid: int = 0
    per_benchmark: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0

    @property
    def ok(self) -> bool:
        return self.problem_count == 0 and self.valid > 0

    def add_problem(self, message: str) -> None:
        self.problem_count += 1
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append(message)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "rows": self.rows, "valid": self.valid, "per_benchmark": self.per_benchmark,
                "problem_count": self.problem_count, "problems": self.problems}


def _check_tasks(report: DryRunReport, label: str, tasks: list[QATask]) -> None:
    for task_id, count in Counter(t.id for t in tasks).items():
        if count > 1:
            report.add_problem(f"{label}: id {task_id!r} appears {count} times (resume keys must be unique)")
    for task in tasks:
        if not any(normalize_answer(g) for g in task.golds):
            report.add_problem(f"{label}: {task.id} has no gold answer that survives normalization: {task.golds}")
    report.per_benchmark[label] = report.per_benchmark.get(label, 0) + len(tasks)


def dry_run(config: Config, data_file: str | Path | None = None) -> DryRunReport:
    """Validate the questions ``deepresearcher eval`` would run, row by row for ``data_file``."""
    report = DryRunReport()
    if data_file is not None:
        from deepresearcher.eval.runner import data_file_split, file_benchmarks

        split = data_file_split(config, data_file)
        grouped: dict[str, list[QATask]] = {}
        for row, record in enumerate(read_records(data_file)):
            report.rows += 1
            try:
                task = record_to_task(record, split=split, row=row)
            except (ValueError, KeyError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
                report.add_problem(f"{data_file} row {row}: {exc}".replace("\n", " "))
                continue
            report.valid += 1
            grouped.setdefault(task.source, []).append(task)
        try:
            labels = file_benchmarks(config, data_file, grouped) if report.valid else []
        except DeepResearcherError as exc:
            report.add_problem(str(exc))
            return report
        for label in labels:  # the benchmarks the eval would run, as `eval --data` selects them
            _check_tasks(report, label, grouped[label])
        return report
    from deepresearcher.eval.runner import load_eval_tasks

    for spec in config.eval.benchmarks:
        try:
            tasks = next(iter(load_eval_tasks(config.model_copy(
                update={"eval": config.eval.model_copy(update={"benchmarks": [spec]})})).values()))
        except DeepResearcherError as exc:
            report.add_problem(f"{spec}: {exc}")
            continue
        report.rows += len(tasks)
        report.valid += len(tasks)
        _check_tasks(report, spec, tasks)
    return report
