"""`bench train --slow-tools`: synchronous and asynchronous GRPO from one warm start with slow tools, compared on
held-out F1 against training wall time."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_time_to_target_defaults_to_the_lower_best_and_reports_each_first_crossing(load_bench) -> None:
    time_to_target = load_bench("train").time_to_target
    curves = {"sync": [{"elapsed_s": 10, "heldout_f1": 0.2}, {"elapsed_s": 20, "heldout_f1": 0.5}],
              "async": [{"elapsed_s": 4, "heldout_f1": 0.3}, {"elapsed_s": 8, "heldout_f1": 0.4}]}
    assert time_to_target(curves, None) == (0.4, {"sync": 20, "async": 8})
    assert time_to_target(curves, 0.45) == (0.45, {"sync": 20, "async": None})


def test_each_pair_has_its_own_ratio_and_the_median_keeps_the_spread(load_bench) -> None:
    bench = load_bench("train")

    def run(samples_per_s: float, curve: list[tuple[float, float]]) -> dict:
        return {"samples_per_s": samples_per_s, "heldout_curve": [{"elapsed_s": t, "heldout_f1": f} for t, f in curve]}

    pairs = [
        bench.pair_summary(0, {"sync": run(1.0, [(10, 0.3), (20, 0.5)]), "async": run(2.0, [(5, 0.5)])}, None),
        bench.pair_summary(1, {"sync": run(1.0, [(30, 0.5)]), "async": run(1.5, [(10, 0.4), (20, 0.6)])}, None),
        bench.pair_summary(2, {"sync": run(1.0, [(12, 0.2)]), "async": run(3.0, [(6, 0.1)])}, 0.9),
    ]
    assert [p["speedup_to_target"] for p in pairs] == [4.0, 1.5, None]  # the third never reached 0.9
    assert [p["speedup_samples_per_s"] for p in pairs] == [2.0, 1.5, 3.0]
    assert pairs[1]["target_heldout_f1"] == 0.5 and pairs[1]["wall_s_to_target"] == {"sync": 30, "async": 20}
    assert bench.spread([p["speedup_to_target"] for p in pairs]) == {
        "median": 2.75, "min": 1.5, "max": 4.0, "pairs": [4.0, 1.5, None]}
    assert bench.spread([None]) == {"median": None, "min": None, "max": None, "pairs": [None]}


@pytest.mark.timeout(300)
def test_slow_tools_compares_both_trainers_on_one_warm_start(load_bench, tiny_model_dir: Path, tmp_path: Path) -> None:
    config = tmp_path / "tiny.yaml"
    config.write_text(
        f"cache_dir: {tmp_path / 'cache'}\nworld: {{size: tiny}}\nsearch: {{top_k: 1, snippet_chars: 40}}\n"
        "agent: {max_turns: 2, max_tokens_per_turn: 12, context_budget: 1024}\n"
        "train: {compact_prompt: true, learning_rate: 1.0e-3, kl_coef: 0.0, entropy_coef: 0.0}\n", encoding="utf-8")
    result = load_bench("train").main([
        "--slow-tools", "--model", str(tiny_model_dir), "--config", str(config), "--steps", "2", "--prompts", "2",
        "--group", "2", "--micro-batch", "4", "--eval-every", "1", "--eval-tasks", "4", "--median-s", "0.01",
        "--p99-s", "0.05", "--seeds", "0,1"])
    assert result["order"] == ["sync:0", "async:0", "sync:1", "async:1"]  # alternated, never all of one first
    assert [pair["seed"] for pair in result["pairs"]] == [0, 1]
    for pair, mode in ((pair, mode) for pair in result["pairs"] for mode in ("sync", "async")):
        run = pair[mode]
        assert run["calibration_sft_tokens_per_s"] > 0
        assert [p["step"] for p in run["heldout_curve"]] == [1, 2]
        assert run["heldout_curve"][0]["elapsed_s"] <= run["heldout_curve"][1]["elapsed_s"] == run["wall_s"]
        assert run["samples"] == 8  # wall_s is rounded to 0.1 s, samples_per_s is not:
        assert 8 / (run["wall_s"] + 0.05) <= run["samples_per_s"] <= 8 / max(run["wall_s"] - 0.05, 1e-9)
        assert 0 <= run["trainer_idle_share"] <= 1
        assert sum(run["staleness_histogram"].values()) >= run["samples"]
    for pair in result["pairs"]:
        assert pair["speedup_samples_per_s"] == pytest.approx(
            pair["async"]["samples_per_s"] / pair["sync"]["samples_per_s"], rel=0.02)
        assert set(pair["wall_s_to_target"]) == {"sync", "async"}
    assert result["speedup_samples_per_s"]["pairs"] == [pair["speedup_samples_per_s"] for pair in result["pairs"]]
