"""Each quickstart step's time beside the machine's speed while it ran, and the time it would have taken on a
machine of a reference speed, so a slow run explains itself.

The quickstart measures the machine (``quickstart.calibration``: SFT tokens/s of a fixed micro-batch) at the
start, after SFT and at the end. A step is put beside the mean of the two figures around it, and its seconds
are scaled by that figure over ``REFERENCE_TOKENS_PER_SECOND``: a step that took 600 s while the machine
measured 6,000 tokens/s counts as 360 s at 10,000. The scaling assumes a step's time goes as the machine's
calibration figure; it does for SFT and the GRPO updates (the same kind of work), less so for the tools and
the decoding of evaluations (one calibration of ~1 s also reads noisily on a busy machine), so the
normalised figures compare runs of one recipe on different hours, not different recipes.

A step that ran on fewer torch threads than the calibrations (``train.adapt_threads`` drops to one where another
job holds a core) is put beside a calibration taken at its own count instead: two threads beside a busy
neighbour measure a collapse the step never ran into, and read slower than its one thread ran.
"""

from __future__ import annotations

from collections.abc import Mapping

REFERENCE_TOKENS_PER_SECOND = 10_000.0
"""The calibration figure that normalised step times are quoted at (SFT tokens/s)."""

CALIBRATION_AFTER = {"start": None, "after SFT": "sft", "end": "*"}
"""Where each of the quickstart's calibrations is taken: before every step (None), after the named step, or
after the last one ("*")."""


def stage_calibrations(timings: Mapping[str, float], during: Mapping[str, float],
                       at_threads: Mapping[str, float] | None = None) -> dict[str, float]:
    """The calibration figure each step of ``timings`` (in the order they ran) ran beside: the mean of the last
    one taken before it and the first one taken after it (either alone where there is only one). ``during``:
    name (``CALIBRATION_AFTER``) to SFT tokens/s; names it does not know are left out. ``at_threads``: step to
    the figure taken at the thread count it ran on, where that differs from ``during``'s; it wins."""
    steps = list(timings)
    points: list[tuple[int, float]] = []  # (index of the first step after the calibration, figure)
    for name, figure in during.items():
        if name not in CALIBRATION_AFTER:
            continue
        after = CALIBRATION_AFTER[name]
        if after is None:
            points.append((0, figure))
        elif after == "*":
            points.append((len(steps), figure))
        elif after in steps:
            points.append((steps.index(after) + 1, figure))
    if not points:
        return {}
    out = {}
    for i, step in enumerate(steps):
        before = [figure for at, figure in points if at <= i]
        later = [figure for at, figure in points if at > i]
        around = ([before[-1]] if before else []) + ([later[0]] if later else [])
        out[step] = sum(around) / len(around)
    return {**out, **{step: figure for step, figure in (at_threads or {}).items() if step in out}}


def normalised_seconds(timings: Mapping[str, float], during: Mapping[str, float],
                       reference: float = REFERENCE_TOKENS_PER_SECOND,
                       at_threads: Mapping[str, float] | None = None) -> dict[str, float]:
    """Each step's seconds at the ``reference`` calibration figure: seconds x (its figure / reference)."""
    figures = stage_calibrations(timings, during, at_threads)
    return {step: round(seconds * figures[step] / reference, 1) for step, seconds in timings.items() if step in figures}
