"""The machine's calibration figure: a fixed SFT workload timed, leaving the caller's random state alone."""

from __future__ import annotations

import pytest
import torch

from deepresearcher.quickstart.calibration import CALIBRATION_VERSION, measure_machine


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
