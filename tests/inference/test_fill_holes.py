"""The engine's row order after rows finish: kept rows stay in their slots, later rows fill the holes."""

from __future__ import annotations

import random

from deepresearcher.inference.engine import fill_holes


def test_kept_rows_under_the_kept_count_stay_and_the_rest_fill_the_holes_in_order() -> None:
    assert fill_holes([0, 1, 2]) == [0, 1, 2]
    assert fill_holes([0, 2, 4]) == [0, 4, 2]
    assert fill_holes([1, 2, 3]) == [3, 1, 2]
    assert fill_holes([5, 7]) == [5, 7]
    assert fill_holes([]) == []


def test_the_order_holds_every_kept_row_once_and_moves_no_more_rows_than_finished() -> None:
    rng = random.Random(0)
    for _ in range(200):
        rows = rng.randint(1, 40)
        keep = sorted(rng.sample(range(rows), rng.randint(0, rows)))
        order = fill_holes(keep)
        assert sorted(order) == keep
        moved = sum(slot != row for slot, row in enumerate(order))
        assert moved <= rows - len(keep)  # a finished row frees one slot; at most one row moves into it
        assert all(order[row] == row for row in keep if row < len(keep))
