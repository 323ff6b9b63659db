"""`bench reward_judge`: the oracle's world answers written five ways, F1 beside a scripted judge's verdicts."""

from __future__ import annotations

from pathlib import Path


def test_f1_and_the_judge_part_on_hedged_partial_and_verbose_answers(load_bench, small_world: Path,
                                                                       tmp_path: Path) -> None:
    """Exact and wrong answers agree; hedges and partial names are paid by F1 only, verbose right answers by the
    judge only; on comparisons the hedge beats a coin's pick under F1 and loses to it under the judge."""
    result = load_bench("reward_judge").main(["--tasks", "40", "--set", f"world.dir={small_world}",
                                              "--set", f"cache_dir={tmp_path}"])
    rows = {row["kind"]: row for row in result["rows"]}
    assert result["oracle_missed"] == 0 and result["judge"] == "scripted"
    for kind in ("exact", "wrong"):
        assert rows[kind]["f1_pays_judge_refuses"] == rows[kind]["judge_pays_f1_does_not"] == 0
    assert rows["exact"]["judge_correct"] == 1.0 and rows["wrong"]["judge_correct"] == 0.0
    assert rows["hedged"]["judge_correct"] == rows["partial"]["judge_correct"] == 0.0
    assert rows["hedged"]["f1_pays_judge_refuses"] > 0 and rows["partial"]["f1_pays_judge_refuses"] > 0
    assert rows["verbose"]["judge_correct"] == 1.0 and rows["verbose"]["judge_pays_f1_does_not"] > 0
    hedge, coin = rows["hedged, comparison"], rows["coin pick, comparison (expected)"]
    assert hedge["mean_f1"] > coin["mean_f1"] and hedge["judge_correct"] < coin["judge_correct"]
    assert "| hedged |" in result["markdown"]
