"""Training mixes (ratios, deduplication, seeds) and the verl parquet round trip."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from deepresearcher.data import (
    PAPER_RATIOS,
    QATask,
    allocate,
    load_benchmark,
    load_file,
    make_mix,
    write_verl_parquet,
)
from deepresearcher.errors import DataError


def _pool(source: str, n: int, start: int = 0) -> list[QATask]:
    return [
        QATask(id=f"{source}_{i}", source=source, question=f"What is {source} fact number {i}?", golds=[f"a{i}"])
        for i in range(start, start + n)
    ]


def test_mix_follows_ratios_exactly() -> None:
    """A mix of 800 at 1:1:3:3 takes 100/100/300/300, and the result is shuffled across sources."""
    pools = {name: _pool(name, 400) for name in PAPER_RATIOS}
    mix, report = make_mix(pools, PAPER_RATIOS, total=800, seed=1)
    assert Counter(t.source for t in mix) == {"nq": 100, "tq": 100, "hotpotqa": 300, "2wiki": 300}
    assert report.counts == {"2wiki": 300, "hotpotqa": 300, "nq": 100, "tq": 100}
    assert len({t.id for t in mix}) == 800
    assert len({t.source for t in mix[:20]}) > 1


def test_mix_without_total_is_the_largest_that_fits() -> None:
    """Without a total, the smallest pool relative to its share sets the size."""
    pools = {"nq": _pool("nq", 50), "tq": _pool("tq", 500), "hotpotqa": _pool("hotpotqa", 500),
             "2wiki": _pool("2wiki", 120)}
    mix, report = make_mix(pools, PAPER_RATIOS, seed=0)
    # 2wiki: 120 / (3/8) = 320 total; nq would allow 400.
    assert len(mix) == 320 and report.counts == {"2wiki": 120, "hotpotqa": 120, "nq": 40, "tq": 40}


def test_allocate_sums_to_total() -> None:
    """Largest-remainder rounding always hands out exactly the total."""
    for total in range(0, 50):
        assert sum(allocate(total, {"a": 1, "b": 1, "c": 3, "d": 3}).values()) == total
    assert allocate(3, {"a": 1, "b": 1, "c": 1}) == {"a": 1, "b": 1, "c": 1}


def test_mix_drops_eval_overlap_and_duplicates() -> None:
    """Questions equal to an evaluation question after normalization, and repeats, never enter the mix."""
    nq = _pool("nq", 10)
    nq.append(QATask(id="nq_dup", source="nq", question="what is NQ fact number 3", golds=["x"]))
    tq = _pool("tq", 10)
    tq.append(QATask(id="tq_dup", source="tq", question="What is nq fact number 4?!", golds=["x"]))
    evaluation = [
        QATask(id="e1", source="nq", question="What is the nq fact number 0?", golds=["a"]),
        "What is tq fact number 9",
    ]
    mix, report = make_mix({"nq": nq, "tq": tq}, {"nq": 1, "tq": 1}, exclude=evaluation, seed=3)
    questions = {t.question for t in mix}
    assert "What is nq fact number 0?" not in questions and "What is tq fact number 9?" not in questions
    assert report.dropped_eval_overlap == {"nq": 1, "tq": 1}
    assert report.dropped_duplicates == {"nq": 1, "tq": 1}
    assert len(mix) == 18


def test_mix_is_seeded() -> None:
    """The same seed gives the same mix; another seed gives another one."""
    pools = {name: _pool(name, 100) for name in PAPER_RATIOS}
    first = [t.id for t in make_mix(pools, PAPER_RATIOS, total=80, seed=5)[0]]
    again = [t.id for t in make_mix(pools, PAPER_RATIOS, total=80, seed=5)[0]]
    other = [t.id for t in make_mix(pools, PAPER_RATIOS, total=80, seed=6)[0]]
    assert first == again and first != other


def test_mix_errors_say_what_to_change() -> None:
    """Too few questions or a missing pool raise a DataError naming the pool."""
    with pytest.raises(DataError, match="nq needs 100 but has 10"):
        make_mix({"nq": _pool("nq", 10), "tq": _pool("tq", 100)}, {"nq": 1, "tq": 1}, total=200)
    with pytest.raises(DataError, match="No pool of tasks for hotpotqa"):
        make_mix({"nq": _pool("nq", 10)}, {"nq": 1, "hotpotqa": 3})


def _dispatched_sources(init_file: Path) -> set[str]:
    """The data_source names the original trainer sends to its F1 reward (the list beside "nq" in its dispatch)."""
    import ast

    for node in ast.walk(ast.parse(init_file.read_text(encoding="utf-8"))):
        if isinstance(node, ast.List) and any(isinstance(e, ast.Constant) and e.value == "nq" for e in node.elts):
            return {e.value for e in node.elts}
    raise AssertionError(f"no dispatch list with 'nq' in {init_file}")


def test_verl_parquet_spells_sources_as_the_original_trainer(reference_path, tmp_path: Path) -> None:
    """Every QA source we write is one the original reward dispatch accepts (``Bamboogle``), and reads back canonical."""
    init_file = reference_path("verl/utils/reward_score/__init__.py")
    sources = ["nq", "tq", "hotpotqa", "2wiki", "musique", "bamboogle", "popqa"]
    tasks = [QATask(id=f"{s}_1", source=s, question=f"{s}?", golds=["x"]) for s in sources]
    written = pq.read_table(write_verl_parquet(tasks, tmp_path / "mix.parquet")).column("data_source").to_pylist()
    assert "Bamboogle" in written and set(written) <= _dispatched_sources(init_file)
    assert [t.source for t in load_file(tmp_path / "mix.parquet")] == sources


def test_verl_parquet_round_trip(tmp_path: Path) -> None:
    """Tasks written in verl format read back with the same id, source, question, golds and split."""
    tasks = [
        QATask(id="nq_1", source="nq", question="Who?", golds=["Ann", "Ann B."], split="train"),
        QATask(id="hotpotqa_2", source="hotpotqa", question="Türkiye’s capital?", golds=["Ankara"], split="train"),
    ]
    path = write_verl_parquet(tasks, tmp_path / "out" / "train.parquet")
    table = pq.read_table(path)
    assert table.column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    row = table.to_pylist()[0]
    assert row["prompt"] == [{"content": "Who?", "role": "user"}]
    assert row["reward_model"]["ground_truth"] == "Ann<|answer_split|>Ann B."
    back = load_file(path)
    assert [(t.id, t.source, t.question, t.golds, t.split) for t in back] == [
        (t.id, t.source, t.question, t.golds, t.split) for t in tasks
    ]


def test_real_mix_against_real_eval_sets(shared_data_dir: Path, tmp_path: Path) -> None:
    """A mix from real dev files excludes DeepResearcher's test questions and round-trips through parquet."""
    pools = {"nq": load_benchmark("nq", "open_dev"), "hotpotqa": load_benchmark("hotpotqa", "full_dev")}
    evaluation = load_benchmark("deepresearcher", "test")
    mix, report = make_mix(pools, {"nq": 1, "hotpotqa": 3}, total=400, exclude=evaluation, seed=0)
    assert report.dropped_eval_overlap["nq"] > 0 and report.dropped_eval_overlap["hotpotqa"] > 0
    eval_questions = {t.question.lower() for t in evaluation}
    assert not any(t.question.lower() in eval_questions for t in mix)
    back = load_file(write_verl_parquet(mix, tmp_path / "mix.parquet"))
    assert [t.golds for t in back] == [t.golds for t in mix]
