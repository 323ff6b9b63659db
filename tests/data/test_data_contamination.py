"""The contamination filter: k samples per question, decisions saved as made, resumable."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from deepresearcher.data import QATask, filter_contaminated, read_decisions

TASKS = [QATask(id=f"q{i}", source="nq", question=f"Question {i}?", golds=[f"answer {i}"]) for i in range(10)]


class KnowsEvenQuestions:
    """A deterministic 'base policy': knows the even questions, but only on its third try of each."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.calls: dict[str, int] = {}
        self.fail_after = fail_after

    async def __call__(self, question: str) -> str:
        await asyncio.sleep(0)
        if self.fail_after is not None and sum(self.calls.values()) >= self.fail_after:
            raise RuntimeError("generator died")
        self.calls[question] = self.calls.get(question, 0) + 1
        number = int(question.split()[1].rstrip("?"))
        if number % 2 == 0 and self.calls[question] >= 3:
            return f"I believe it is Answer {number}."
        return "no idea"


async def test_drops_questions_answered_without_search(tmp_path: Path) -> None:
    """Even questions (answered on the 3rd sample) are dropped; odd ones kept after k samples each."""
    answer = KnowsEvenQuestions()
    result = await filter_contaminated(TASKS, answer, tmp_path / "decisions.jsonl", k=4, progress=False)
    assert [t.id for t in result.kept] == ["q1", "q3", "q5", "q7", "q9"]
    assert [t.id for t in result.dropped] == ["q0", "q2", "q4", "q6", "q8"]
    assert all(answer.calls[f"Question {i}?"] == (3 if i % 2 == 0 else 4) for i in range(10))  # stops early
    decisions = read_decisions(tmp_path / "decisions.jsonl")
    assert decisions["q2"] == {"id": "q2", "contaminated": True, "samples": 3, "answer": "I believe it is Answer 2."}
    assert decisions["q3"] == {"id": "q3", "contaminated": False, "samples": 4, "answer": None}


async def test_k_bounds_the_samples(tmp_path: Path) -> None:
    """With k=2, the third-try knowledge is never reached: nothing is dropped."""
    result = await filter_contaminated(TASKS, KnowsEvenQuestions(), tmp_path / "d.jsonl", k=2, progress=False)
    assert len(result.kept) == 10 and not result.dropped


async def test_resume_after_a_crash_skips_decided_ids(tmp_path: Path) -> None:
    """A run that dies mid-way keeps its decisions; the rerun asks only the undecided questions."""
    path = tmp_path / "decisions.jsonl"
    with pytest.raises(RuntimeError, match="generator died"):
        await filter_contaminated(TASKS, KnowsEvenQuestions(fail_after=12), path, k=4, concurrency=1, progress=False)
    decided = read_decisions(path)
    assert 0 < len(decided) < len(TASKS)
    with path.open("ab") as handle:  # a torn line, as a kill during a write leaves it
        handle.write(b'{"id": "q9", "contamin')
    second = KnowsEvenQuestions()
    result = await filter_contaminated(TASKS, second, path, k=4, concurrency=3, progress=False)
    asked = {q for q in second.calls}
    assert asked == {t.question for t in TASKS if t.id not in decided}
    assert result.resumed == len(decided) and result.decided_now == len(TASKS) - len(decided)
    fresh = await filter_contaminated(TASKS, KnowsEvenQuestions(), tmp_path / "fresh.jsonl", k=4, progress=False)
    assert [t.id for t in result.kept] == [t.id for t in fresh.kept]
    ids = [orjson.loads(line)["id"] for line in path.read_bytes().splitlines() if line.endswith(b"}")]
    assert sorted(ids) == sorted(t.id for t in TASKS)  # every id decided exactly once


async def test_sync_answer_fn_and_custom_correctness(tmp_path: Path) -> None:
    """A plain function works too, and the correctness rule can be replaced (here: exact match only)."""

    def parrot(question: str) -> str:
        return "answer 1" if question == "Question 1?" else "it is answer 2"

    result = await filter_contaminated(
        TASKS[:3], parrot, tmp_path / "d.jsonl", k=2, progress=False,
        is_correct=lambda a, golds: a in golds,
    )
    assert [t.id for t in result.dropped] == ["q1"]


async def test_yes_no_golds_need_an_exact_answer(tmp_path: Path) -> None:
    """By default an answer containing a gold counts, but "no idea" does not count as the gold "no"."""
    tasks = [
        QATask(id="yn", source="hotpotqa", question="Same nationality?", golds=["no"]),
        QATask(id="name", source="nq", question="Who wrote it?", golds=["Bob Dylan"]),
    ]

    async def vague(question: str) -> str:
        return "no idea, maybe Bob Dylan"

    result = await filter_contaminated(tasks, vague, tmp_path / "d.jsonl", k=3, progress=False)
    assert [t.id for t in result.kept] == ["yn"] and [t.id for t in result.dropped] == ["name"]
