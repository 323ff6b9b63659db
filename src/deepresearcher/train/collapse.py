"""Warnings for a GRPO run that shows the signs of collapse, read from its per-step metrics.

Collapse is the failure most reported by the users of comparable agents (Search-R1, ZeroSearch,
Agent-R1): the policy drifts from the format it was warm-started on, its sampling turns to noise or
freezes, and its groups stop carrying a gradient. Each shows in ``metrics.jsonl`` well before the
held-out score falls, as a trend between the run's first ``window`` steps and its last ``window``:

- ``format_errors``: the sampled format-error rate rose by more than ``format_error_rise``, or is above
  ``format_error_max``;
- ``entropy_high`` / ``entropy_low``: the policy entropy grew past ``entropy_rise`` times, or fell under
  ``entropy_drop`` times, its early value;
- ``zero_signal``: more than ``zero_signal_max`` of the groups had equal rewards (``zero_signal_share``).

The watch only warns (the training log as steps end, and the run's report); it never stops a run.
Thresholds are ``train.collapse`` (``config.CollapseConfig``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from deepresearcher.config import CollapseConfig

__all__ = ["CollapseSign", "CollapseWatch", "collapse_signs"]


@dataclass(frozen=True)
class CollapseSign:
    """One sign of collapse: which (``kind``), by which step, and what to read in the run."""

    kind: str
    step: int
    message: str


def _values(records: list[dict[str, Any]], key: str) -> list[float]:
    """The finite values of ``key`` in step order (a step without it, or NaN, is left out)."""
    return [float(r[key]) for r in records if isinstance(r.get(key), int | float) and math.isfinite(r[key])]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def collapse_signs(records: list[dict[str, Any]], cfg: CollapseConfig) -> list[CollapseSign]:
    """Every sign of collapse the per-step ``records`` (``metrics.jsonl`` lines) show, at most one per kind."""
    w = cfg.window
    step = int(records[-1].get("step", len(records))) if records else 0
    span = f"the first {w} steps" if w > 1 else "the first step"
    last = f"the last {w}" if w > 1 else "the last step"
    signs: list[CollapseSign] = []

    errors = _values(records, "format_error_rate")
    if len(errors) >= w:
        now = _mean(errors[-w:])
        start = _mean(errors[:w]) if len(errors) >= 2 * w else None
        if start is not None and now - start > cfg.format_error_rise:
            signs.append(CollapseSign("format_errors", step, (
                f"sampled format errors rose from {100 * start:.1f}% ({span}) to {100 * now:.1f}% ({last}), more "
                f"than train.collapse.format_error_rise ({100 * cfg.format_error_rise:.0f} points): the policy is "
                "losing the protocol; a lower learning rate or a KL term keeps it near the warm start")))
        elif now > cfg.format_error_max:
            signs.append(CollapseSign("format_errors", step, (
                f"{100 * now:.1f}% of sampled episodes broke the format over {last} steps, above "
                f"train.collapse.format_error_max ({100 * cfg.format_error_max:.0f}%)")))

    entropy = _values(records, "entropy")
    if len(entropy) >= 2 * w and (start := _mean(entropy[:w])) > 0:
        ratio = _mean(entropy[-w:]) / start
        if ratio > cfg.entropy_rise:
            signs.append(CollapseSign("entropy_high", step, (
                f"policy entropy grew {ratio:.1f}x ({start:.3f} over {span}, {_mean(entropy[-w:]):.3f} over {last}), "
                f"past train.collapse.entropy_rise ({cfg.entropy_rise:g}x): sampling is turning to noise")))
        elif ratio < cfg.entropy_drop:
            signs.append(CollapseSign("entropy_low", step, (
                f"policy entropy fell to {ratio:.2f}x its start ({start:.3f} over {span}, "
                f"{_mean(entropy[-w:]):.3f} over {last}), under train.collapse.entropy_drop ({cfg.entropy_drop:g}x): "
                "the policy stops exploring and its groups will agree")))

    zero = _values(records, "zero_signal_share")
    if len(zero) >= w and (share := _mean(zero[-w:])) > cfg.zero_signal_max:
        signs.append(CollapseSign("zero_signal", step, (
            f"{100 * share:.0f}% of groups had equal rewards over {last} steps (no gradient signal), above "
            f"train.collapse.zero_signal_max ({100 * cfg.zero_signal_max:.0f}%): the tasks are too easy or too hard "
            "for the policy, or its samples no longer differ")))
    return signs


class CollapseWatch:
    """Follows a run step by step and returns each kind of sign the first time it shows."""

    def __init__(self, cfg: CollapseConfig, records: Iterable[dict[str, Any]] = ()) -> None:
        self.cfg = cfg
        self.records = list(records)  # a resumed run's earlier steps
        self.reported: set[str] = {sign.kind for sign in collapse_signs(self.records, cfg)}

    def update(self, record: dict[str, Any]) -> list[CollapseSign]:
        """Add one step's metrics; the signs not reported before."""
        self.records.append(record)
        new = [sign for sign in collapse_signs(self.records, self.cfg) if sign.kind not in self.reported]
        self.reported.update(sign.kind for sign in new)
        return new
