"""Step times beside the calibration around each step, and at the reference figure."""

from __future__ import annotations

import pytest

from deepresearcher.quickstart.timing import REFERENCE_TOKENS_PER_SECOND, normalised_seconds, stage_calibrations

TIMINGS = {"world": 2.0, "oracle": 13.0, "tokenizer+model": 1.0, "sft": 500.0, "eval_sft": 40.0, "grpo": 170.0,
           "eval_grpo": 45.0}


def test_each_step_sits_between_the_calibrations_taken_before_and_after_it() -> None:
    figures = stage_calibrations(TIMINGS, {"start": 6000.0, "after SFT": 8000.0, "end": 12000.0})
    assert figures["world"] == figures["sft"] == 7000.0  # start and after SFT
    assert figures["eval_sft"] == figures["eval_grpo"] == 10000.0  # after SFT and end


def test_one_calibration_alone_is_every_steps_figure_and_unknown_names_are_ignored() -> None:
    assert set(stage_calibrations(TIMINGS, {"start": 5000.0, "elsewhere": 1.0}).values()) == {5000.0}
    assert stage_calibrations(TIMINGS, {}) == {}
    # a run without SFT (train.sft.steps=0): "after SFT" is never taken, start and end bracket every step
    assert set(stage_calibrations({"world": 1.0, "grpo": 2.0}, {"start": 4000.0, "end": 6000.0}).values()) == {5000.0}


def test_a_slow_hour_scales_its_seconds_down_to_the_reference() -> None:
    slow = normalised_seconds(TIMINGS, {"start": 6000.0, "after SFT": 6000.0, "end": 6000.0})
    assert slow["sft"] == pytest.approx(500.0 * 6000.0 / REFERENCE_TOKENS_PER_SECOND)
    fast = normalised_seconds({k: v * 0.6 for k, v in TIMINGS.items()},
                              {"start": 10000.0, "after SFT": 10000.0, "end": 10000.0})
    assert sum(fast.values()) == pytest.approx(sum(slow.values()), abs=0.5)  # the same recipe, two hours, one figure


def test_a_step_on_fewer_threads_sits_beside_the_calibration_at_its_own_count() -> None:
    # beside a busy neighbour: two threads calibrate at 3,000 while the steps that dropped to one ran at 7,000
    during = {"start": 3000.0, "after SFT": 3000.0, "end": 3000.0}
    own = {"sft": 7000.0, "grpo": 7000.0, "not a step": 1.0}
    figures = stage_calibrations(TIMINGS, during, own)
    assert figures["sft"] == figures["grpo"] == 7000.0 and figures["eval_sft"] == 3000.0
    assert "not a step" not in figures
    seconds = normalised_seconds(TIMINGS, during, at_threads=own)
    assert seconds["sft"] == pytest.approx(500.0 * 7000.0 / REFERENCE_TOKENS_PER_SECOND)
    assert seconds["oracle"] == pytest.approx(13.0 * 3000.0 / REFERENCE_TOKENS_PER_SECOND)
