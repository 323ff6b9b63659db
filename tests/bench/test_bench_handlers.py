"""``bench handlers`` end to end on a small load: its JSON reports the upstream calls the bar is about."""

from __future__ import annotations


def test_bench_handlers_reports_upstream_calls_per_routing(load_bench):
    """Keyed routing over three real handler processes pays each distinct query and page once, and a
    kill loses no rollout; the report carries the counts the docs quote."""
    bench = load_bench("handlers")
    report = bench.main(["--routing", "keyed", "--groups", "4", "--group-size", "6", "--concurrency", "8",
                         "--upstream-delay-s", "0.05"])
    keyed, kill = report["runs"]["keyed"], report["runs"]["keyed_kill"]
    assert (keyed["distinct_queries"], keyed["distinct_pages"]) == (8, 8)
    assert (keyed["upstream_searches"], keyed["upstream_fetches"]) == (8, 8)
    assert keyed["lost"] == kill["lost"] == 0 and kill["rollouts"] == 24
    assert 0 <= kill["extra_upstream_searches"] <= kill["killed_handler_share"]
    assert all(report["bar"].values()), report["bar"]
