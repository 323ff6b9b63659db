"""No-tools baselines of world tasks: what answering from the question's form alone scores.

A trained agent's F1 means little without them: a policy that learns to say "no" to every yes/no
question or the most common country to every "which country" question gains F1 without reading a
page. Each baseline is fitted on training tasks only and then scored on the evaluated tasks, with the
same metric as the model (``reward.answer_metrics``):

- ``type_prior``: per task type, the best constant answer on the training tasks of that type (for
  comparisons also "the first name" or "the second name");
- ``relation_prior``: the same per task type and relation of the last hop (``hop2`` ending in
  ``country``, comparisons of ``birth_year``, ...);
- ``cannot_find``: always "cannot find";
- ``best``: per task type, whichever of the three did best on the training tasks of that type, judged
  by two-fold cross-fitting (fitted on one half, scored on the other), so a prior that only memorized
  its training answers is not chosen.

The best constant answer of a group is chosen among its most frequent gold answers *and* gold tokens
(answering "Guild" earns partial F1 on every "… Guild"). The baselines know each task's type, which a
policy can only partly tell from the question (a ``hop1`` and an ``unanswerable`` question read
alike), so they are upper bounds of guessing from the question's form: a margin over ``best`` is
conservative.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from deepresearcher.reward import f1_score, normalize_answer, says_cannot_find
from deepresearcher.world import UNANSWERABLE_ANSWER, Task

__all__ = ["BASELINES", "BaselineReport", "Baselines", "Guess", "GuessTask", "fit_baselines", "margin_rows",
           "model_f1_by_type", "model_f1_se_by_type"]

BASELINES: tuple[str, ...] = ("type_prior", "relation_prior", "cannot_find")
"""The fitted baselines, in the order ties are broken; ``best`` picks among them per task type."""
ALL = "all"
_CANDIDATES = 12  # most frequent answers and most frequent answer tokens tried per group


@dataclass(frozen=True)
class GuessTask:
    """What a no-tools guess may know of a task: its type, the last hop's relation and, for a comparison,
    the names it compares. ``golds`` and ``answerable`` are used for fitting and scoring only."""

    id: str
    type: str
    relation: str
    golds: tuple[str, ...]
    answerable: bool
    names: tuple[str, ...] = ()

    @classmethod
    def of(cls, task: Task | dict[str, Any]) -> GuessTask:
        """From a world ``Task`` or its dict (as the trainer keeps tasks: ``Task.to_dict`` plus extra keys)."""
        data = task.to_dict() if isinstance(task, Task) else task
        chain = data.get("chain") or []
        kind = data.get("type", "task")
        return cls(
            id=data["id"], type=kind, relation=chain[-1]["relation"] if chain else "",
            golds=tuple(data.get("golds", [])), answerable=bool(data.get("answerable", True)),
            names=tuple(hop["subject"] for hop in chain) if kind == "comparison" else (),
        )

    def key(self, baseline: str) -> str:
        """The group whose fitted guess answers this task under ``baseline``."""
        return self.type if baseline == "type_prior" else f"{self.type}/{self.relation}"


@dataclass(frozen=True)
class Guess:
    """A no-tools answer rule: a constant answer, or the name at ``position`` of a comparison."""

    answer: str | None = None
    position: int | None = None

    def apply(self, task: GuessTask) -> str | None:
        if self.position is not None:
            return task.names[self.position] if self.position < len(task.names) else None
        return self.answer

    def describe(self) -> str:
        return f"name #{self.position + 1}" if self.position is not None else repr(self.answer)


_CANNOT_FIND = Guess(UNANSWERABLE_ANSWER)


def _f1(answer: str | None, golds: tuple[str, ...], answerable: bool) -> float:
    """``reward.answer_metrics``'s F1 (the model's metric), without computing EM and cover-EM too."""
    if not answerable:
        return float(says_cannot_find(answer))
    return f1_score(answer, golds) if answer is not None else 0.0


def _candidates(group: list[GuessTask]) -> list[Guess]:
    """Positions (for comparisons), then the group's most frequent answers and answer tokens."""
    answers = Counter(t.golds[0] for t in group if t.golds)
    # dict.fromkeys, not set: ties must break the same way in every process (set order follows the hash seed)
    tokens = Counter(tok for t in group if t.golds for tok in dict.fromkeys(normalize_answer(t.golds[0]).split()))
    width = max((len(t.names) for t in group), default=0)
    texts = [a for a, _ in answers.most_common(_CANDIDATES)] + [w for w, _ in tokens.most_common(_CANDIDATES)]
    return [Guess(position=i) for i in range(width)] + [Guess(a) for a in dict.fromkeys(texts)]


def _best_guess(group: list[GuessTask]) -> Guess:
    """The candidate with the highest mean F1 over ``group`` (ties: the earlier candidate)."""
    outcomes = Counter((t.golds, t.answerable) for t in group)  # a constant scores the same on equal golds
    best, best_score = _CANNOT_FIND, -1.0
    for guess in _candidates(group):
        if guess.position is None:
            score = sum(n * _f1(guess.answer, golds, ok) for (golds, ok), n in outcomes.items())
        else:
            score = sum(_f1(guess.apply(t), t.golds, t.answerable) for t in group)
        if score > best_score:
            best, best_score = guess, score
    return best


@dataclass
class Baselines:
    """Fitted guesses: per baseline, the guess of each group; per task type, the baseline ``best`` uses."""

    guesses: dict[str, dict[str, Guess]]
    choice: dict[str, str]

    def answer(self, baseline: str, task: GuessTask) -> str | None:
        """The baseline's answer to ``task`` (None when its group was never seen in training)."""
        if baseline == "cannot_find":
            return UNANSWERABLE_ANSWER
        if baseline == "best":
            return self.answer(self.choice.get(task.type, "cannot_find"), task)
        guess = self.guesses[baseline].get(task.key(baseline))
        return None if guess is None else guess.apply(task)

    def evaluate(self, tasks: Iterable[Task | dict[str, Any]]) -> BaselineReport:
        """F1 of every baseline (and ``best``) on ``tasks``, per type and over all of them."""
        views = [GuessTask.of(t) for t in tasks]
        names = (*BASELINES, "best")
        scores: dict[str, dict[str, list[float]]] = {b: defaultdict(list) for b in names}
        for task in views:
            for b in names:
                value = _f1(self.answer(b, task), task.golds, task.answerable)
                scores[b][task.type].append(value)
                scores[b][ALL].append(value)
        types = sorted({t.type for t in views})
        f1 = {b: {k: sum(v) / len(v) for k, v in scores[b].items()} for b in names}
        return BaselineReport(
            n={k: len(scores["best"][k]) for k in [*types, ALL]}, f1=f1,
            choice={k: v for k, v in self.choice.items() if k in types},
            guesses={b: {k: g.describe() for k, g in sorted(self.guesses[b].items())} for b in self.guesses},
        )


def _fit_guesses(tasks: list[GuessTask]) -> dict[str, dict[str, Guess]]:
    out: dict[str, dict[str, Guess]] = {}
    for baseline in ("type_prior", "relation_prior"):
        groups: dict[str, list[GuessTask]] = defaultdict(list)
        for task in tasks:
            groups[task.key(baseline)].append(task)
        out[baseline] = {key: _best_guess(group) for key, group in sorted(groups.items())}
    return out


def fit_baselines(train_tasks: Iterable[Task | dict[str, Any]]) -> Baselines:
    """Fit every baseline on ``train_tasks`` (never on evaluated tasks) and choose ``best`` per type.

    A task that a balanced GRPO prompt order repeats (``repeat`` > 0, ``train.stratify.balanced_cycle``) counts
    once: a recurrence would otherwise sit in both halves of the cross-fitting."""
    views = [GuessTask.of(t) for t in train_tasks if not (isinstance(t, dict) and t.get("repeat"))]
    if not views:
        raise ValueError("no training tasks to fit the no-tools baselines on")
    halves: tuple[list[GuessTask], list[GuessTask]] = ([], [])
    for task in views:  # a split by id, stable across processes (no hash())
        halves[zlib.crc32(task.id.encode()) % 2].append(task)
    held_out: dict[str, dict[str, list[float]]] = {b: defaultdict(list) for b in BASELINES}
    for fit_on, score_on in ((halves[0], halves[1]), (halves[1], halves[0])):
        fold = Baselines(_fit_guesses(fit_on), {})
        for task in score_on:
            for b in BASELINES:
                held_out[b][task.type].append(_f1(fold.answer(b, task), task.golds, task.answerable))
    choice = {}
    for kind in sorted({t.type for t in views}):
        means = {b: sum(v) / len(v) for b in BASELINES if (v := held_out[b].get(kind))}
        choice[kind] = max(means, key=lambda b: (means[b], -BASELINES.index(b))) if means else "cannot_find"
    return Baselines(_fit_guesses(views), choice)


@dataclass
class BaselineReport:
    """Baselines scored on evaluated tasks: ``f1[baseline][type or "all"]``, ``n[type or "all"]``."""

    n: dict[str, int]
    f1: dict[str, dict[str, float]]
    choice: dict[str, str] = field(default_factory=dict)
    guesses: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BaselineReport:
        """Back from ``to_dict`` (a report's JSON)."""
        return cls(n=data["n"], f1=data["f1"], choice=data.get("best_uses", {}), guesses=data.get("guesses", {}))

    def to_dict(self, model_f1: dict[str, float] | None = None,
                model_f1_se: dict[str, float] | None = None) -> dict[str, Any]:
        """For a summary JSON; with the model's F1 per type, also its margin over ``best`` (and with its
        standard errors, those)."""
        out: dict[str, Any] = {"n": self.n, "f1": self.f1, "best_uses": self.choice, "guesses": self.guesses}
        if model_f1_se is not None:
            out["model_f1_se"] = {k: model_f1_se[k] for k in self.n if k in model_f1_se}
        if model_f1 is not None:
            out["model_f1"] = {k: model_f1[k] for k in self.n if k in model_f1}
            out["margin_over_best"] = {k: model_f1[k] - self.f1["best"][k] for k in self.n if k in model_f1}
        return out


def margin_rows(report: BaselineReport, models: dict[str, dict[str, float]],
                ses: dict[str, dict[str, float]] | None = None,
                references: dict[str, dict[str, float]] | None = None) -> list[dict[str, Any]]:
    """Table rows, one per task type and ``all``: n, each model's F1, each baseline's, and the margins.

    ``models`` maps a column name ("after SFT", "model") to F1 per type; each gets a ``margin`` column:
    its F1 minus ``best``'s (fractions, as every F1 here; renderers format them). ``ses`` (the same keys,
    ``model_f1_se_by_type``) adds each model's standard error beside its F1 (``<name> SE``). ``references``
    (F1 per type of policies that research with the tools: the first-hit baseline, the oracle) are columns
    between the models' and the no-tools baselines', without margins.
    """
    rows = []
    for kind, n in report.n.items():
        row: dict[str, Any] = {"type": kind, "n": n}
        for name, f1 in models.items():
            row[name] = f1.get(kind)
            if ses and name in ses:
                row[f"{name} SE"] = ses[name].get(kind)
        for name, f1 in (references or {}).items():
            row[name] = f1.get(kind)
        for b in (*BASELINES, "best"):
            row[b.replace("_", " ")] = report.f1[b][kind]
        row["best uses"] = report.choice.get(kind, "").replace("_", " ") if kind != ALL else "per type"
        for name, f1 in models.items():
            if f1.get(kind) is not None:
                row[f"margin ({name})" if len(models) > 1 else "margin"] = f1[kind] - report.f1["best"][kind]
        rows.append(row)
    return rows


def _f1_by_type(rows: Iterable[dict[str, Any]], types: dict[str, str]) -> dict[str, list[float]]:
    groups: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        kind = types[row.get("task_id", row.get("id"))]
        groups[kind].append(float(row["f1"]))
        groups[ALL].append(float(row["f1"]))
    return groups


def model_f1_by_type(rows: Iterable[dict[str, Any]], types: dict[str, str]) -> dict[str, float]:
    """Mean F1 of scored rows (each with a task id under ``id`` or ``task_id``) per task type and ``all``."""
    return {k: sum(v) / len(v) for k, v in _f1_by_type(rows, types).items()}


def model_f1_se_by_type(rows: Iterable[dict[str, Any]], types: dict[str, str]) -> dict[str, float]:
    """The standard error of each :func:`model_f1_by_type` mean: sample standard deviation / sqrt(n)."""
    out = {}
    for kind, values in _f1_by_type(rows, types).items():
        mean = sum(values) / len(values)
        out[kind] = math.sqrt(sum((x - mean) ** 2 for x in values) / max(len(values) - 1, 1) / len(values))
    return out
