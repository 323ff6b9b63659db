"""pass@k against brute-force enumeration, and the summary rows (mean@k, pass@k, average)."""

from __future__ import annotations

import itertools

import pytest

from deepresearcher.eval.aggregate import pass_at_k, summarize


@pytest.mark.parametrize(("n", "c"), [(1, 0), (1, 1), (4, 1), (5, 2), (6, 3), (8, 0), (8, 8)])
def test_pass_at_k_equals_the_fraction_of_k_subsets_with_a_correct_sample(n, c):
    """The unbiased estimator is exactly the share of k-subsets of the n samples holding a correct one."""
    samples = [1] * c + [0] * (n - c)
    for k in range(1, n + 1):
        subsets = list(itertools.combinations(samples, k))
        assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))


def test_pass_at_k_rejects_impossible_counts():
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def _rec(bench, task, sample, em, f1, cover, judge=None):
    return {"benchmark": bench, "task_id": task, "sample": sample, "em": em, "f1": f1, "cover_em": cover,
            "judge": judge, "answer": "x", "format_ok": True, "turns": 2, "seconds": 1.0}


def test_summary_mean_at_k_pass_at_k_and_macro_average():
    """mean@k averages every sample; pass@k is per question then averaged; the average row is per benchmark."""
    records = [
        _rec("a", "t1", 0, 1.0, 1.0, 1.0, 1.0), _rec("a", "t1", 1, 0.0, 0.5, 0.0, 0.0),
        _rec("a", "t2", 0, 0.0, 0.0, 0.0, 0.0), _rec("a", "t2", 1, 0.0, 0.0, 0.0, 0.0),
        _rec("b", "t3", 0, 1.0, 1.0, 1.0, 1.0), _rec("b", "t3", 1, 1.0, 1.0, 1.0, 1.0),
    ]
    table = summarize(records, k=2, order=["b", "a"])
    assert list(table["benchmarks"]) == ["b", "a"]
    a = table["benchmarks"]["a"]
    assert (a["questions"], a["rollouts"]) == (2, 4)
    assert a["em"] == pytest.approx(0.25) and a["f1"] == pytest.approx(1.5 / 4)
    assert a["pass@2_em"] == pytest.approx(0.5) and a["pass@2_judge"] == pytest.approx(0.5)
    assert table["average"]["em"] == pytest.approx((0.25 + 1.0) / 2)
    assert table["average"]["pass@2_cover_em"] == pytest.approx((0.5 + 1.0) / 2)


def test_judge_column_is_empty_without_a_judge():
    table = summarize([_rec("a", "t1", 0, 1.0, 1.0, 1.0)], k=1)
    assert table["benchmarks"]["a"]["judge"] is None and table["average"]["judge"] is None
    assert "pass@1_em" not in table["benchmarks"]["a"]
