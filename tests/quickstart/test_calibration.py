"""The machine's calibration figure: a fixed SFT workload timed, leaving the caller's random state alone."""

from __future__ import annotations

import pytest
import torch

from deepresearcher.quickstart.calibration import CALIBRATION_VERSION, calibrations_at_stage_threads, measure_machine


def test_calibration_times_the_fixed_sft_micro_batch_and_keeps_the_callers_random_state() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    figure = measure_machine(steps=1)
    assert torch.equal(torch.rand(3), expected), "the fixed model init must not move the caller's generator"
    assert figure.seconds > 0 and figure.sft_tokens_per_second == pytest.approx(16 * 512 / figure.seconds, rel=0.05)
    assert figure.torch_threads == torch.get_num_threads() and figure.version == CALIBRATION_VERSION
    assert f"{figure.sft_tokens_per_second:,.0f} SFT tokens/s" in figure.describe()
    assert figure.to_dict()["sft_tokens_per_second"] == figure.sft_tokens_per_second


def test_calibration_on_a_given_thread_count_says_so_and_restores_the_callers_count() -> None:
    before = torch.get_num_threads()
    figure = measure_machine(steps=1, threads=1)
    assert figure.torch_threads == 1 and "1 torch threads" in figure.describe()
    assert torch.get_num_threads() == before


def test_the_report_calibrates_again_only_at_the_thread_counts_its_steps_dropped_to() -> None:
    assert calibrations_at_stage_threads({"sft": 2, "grpo": 2}, taken_at=2) == {}
    extra = calibrations_at_stage_threads({"sft": 1, "eval_sft": 2, "grpo": 1}, taken_at=2)
    assert list(extra) == [1] and extra[1].torch_threads == 1
