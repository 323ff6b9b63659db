"""`bench drills` selects the drills it trains and scores on: one kind, and comparisons of one direction."""

from __future__ import annotations

import pytest

from deepresearcher.warmstart.drills import Drill

DRILLS = [
    Drill("Were Ana Bel and Cor Dun born in the same city?", ("Ana Bel", "Cor Dun"), ("Eld", "Eld"), "yes"),
    Drill("Which was released earlier, Ana or Bel?", ("Ana", "Bel"), ("1901", "1933"), "Ana"),
    Drill("Which was released later, Ana or Bel?", ("Ana", "Bel"), ("1901", "1933"), "Bel"),
    Drill("Which city has the larger population, Ana or Bel?", ("Ana", "Bel"), ("12", "30"), "Bel"),
    Drill("Which city has the smaller population, Ana or Bel?", ("Ana", "Bel"), ("12", "30"), "Ana"),
]


def test_select_keeps_one_kind_and_with_direction_larger_only_the_later_or_larger_comparisons(load_bench) -> None:
    select = load_bench("drills").select
    assert select(DRILLS, "both", "both") == DRILLS
    assert select(DRILLS, "two_page", "both") == DRILLS[:1]
    assert select(DRILLS, "comparison", "both") == DRILLS[1:]
    assert select(DRILLS, "comparison", "larger") == [DRILLS[2], DRILLS[3]]
    assert select(DRILLS, "both", "larger") == DRILLS[:1] + [DRILLS[2], DRILLS[3]]


def test_a_given_model_refuses_the_options_that_shape_a_fresh_one(load_bench, capsys) -> None:
    main = load_bench("drills").main
    for option in (["--layers", "8"], ["--split-digits"]):
        with pytest.raises(SystemExit):
            main(["--model", "smollm2-135m", *option])
        assert "--model brings its own shape and tokenizer" in capsys.readouterr().err
