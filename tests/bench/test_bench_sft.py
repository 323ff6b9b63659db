"""`bench sft` runs fp32 and bf16 SFT steps in separate processes and reports speed and peak memory of each."""

from __future__ import annotations

import pytest


@pytest.mark.timeout(300)
def test_bench_sft_alternates_fp32_and_bf16_in_child_processes(load_bench) -> None:
    result = load_bench("sft").main(["--steps", "1", "--rounds", "1"])
    assert set(result["runs"]) == {"fp32", "bf16"}
    for (run,) in result["runs"].values():
        assert run["tokens_per_s"] > 0 and run["peak_rss_mb"] > 100
    assert result["bf16_speedup"] == pytest.approx(
        result["runs"]["bf16"][0]["tokens_per_s"] / result["runs"]["fp32"][0]["tokens_per_s"], rel=1e-2)
