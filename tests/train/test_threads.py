"""Torch's thread count chosen by measured speed: kept on a quiet machine, one thread where a job shares the cores."""

from __future__ import annotations

import torch

from deepresearcher.train.threads import ThreadChooser, choose_threads, thread_candidates

torch.set_num_threads(1)


def _run(seconds_per_token: dict[int, float], steps: int, chooser: ThreadChooser, tokens: int = 1000) -> list[int]:
    """Feed ``chooser`` steps whose time depends only on its current count; the counts used, step by step."""
    used = []
    for _ in range(steps):
        used.append(chooser.current)
        chooser.after_step(tokens, seconds=tokens * seconds_per_token[chooser.current])
    return used


def test_a_quiet_machine_keeps_the_default_after_one_probe_window() -> None:
    set_to: list[int] = []
    chooser = ThreadChooser(candidates=[2, 1], window=5, probe_every=100, set_threads=set_to.append)
    used = _run({2: 1.0, 1: 1.8}, 100, chooser)
    assert chooser.kept == 2 and chooser.switches == 0
    assert used[:5] == [2] * 5 and used[5:10] == [1] * 5 and set(used[10:100]) == {2}, "one probe, then back"
    assert set_to == [1, 2]


def test_a_shared_machine_moves_to_one_thread_and_back_when_the_job_ends() -> None:
    chooser = ThreadChooser(candidates=[2, 1], window=5, probe_every=100, set_threads=lambda n: None)
    used = _run({2: 8.0, 1: 1.0}, 60, chooser)  # another job keeps a core busy: two threads 8x slower
    assert chooser.kept == 1 and used[10:45] == [1] * 35 and used.count(2) <= 15, "a probe of two threads now and then"
    used = _run({2: 0.5, 1: 1.0}, 120, chooser)  # the job ended: two threads twice as fast again
    assert chooser.kept == 2 and used[-20:] == [2] * 20


def test_a_job_that_starts_mid_run_is_noticed_by_the_slowdown_not_the_schedule() -> None:
    chooser = ThreadChooser(candidates=[2, 1], window=5, probe_every=1000, set_threads=lambda n: None)
    _run({2: 1.0, 1: 1.8}, 50, chooser)
    assert chooser.kept == 2
    used = _run({2: 8.0, 1: 1.8}, 30, chooser)
    assert chooser.kept == 1 and used[-10:] == [1] * 10, "long before the next scheduled probe"


def test_one_candidate_never_probes_and_choose_threads_takes_the_faster_by_a_margin() -> None:
    assert thread_candidates(1) == [1] and thread_candidates(4) == [4, 1]
    chooser = ThreadChooser(candidates=[1], set_threads=lambda n: pytest_fail())
    _run({1: 1.0}, 20, chooser)
    speeds = {2: 100.0, 1: 105.0}
    current = {"n": 2}
    picked = choose_threads(lambda: speeds[current["n"]], [2, 1], set_threads=lambda n: current.update(n=n))
    assert picked == 2 and current["n"] == 2, "5% faster is within the noise: the default stays"
    speeds[1] = 400.0
    assert choose_threads(lambda: speeds[current["n"]], [2, 1], set_threads=lambda n: current.update(n=n)) == 1
    assert current["n"] == 1


def pytest_fail() -> None:
    raise AssertionError("a single candidate must never be set")
