"""Drop training questions the base policy already answers without search.

The paper keeps a question only if the base model, asked directly k = 10 times, never answers it
correctly: otherwise RL would reward recall from pre-training, not research. Any generator plugs in
as an async ``answer_fn(question) -> str``.

Decisions are appended to a JSONL file as they are made, one line per task::

    {"id": "nq_17", "contaminated": true, "samples": 3, "answer": "1988"}

so a killed run resumes where it stopped: a rerun reads the file and skips every decided id. Samples
of one question are drawn one after another and stop at the first correct answer (that settles it);
questions run concurrently up to ``concurrency``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from deepresearcher.data.schema import QATask
from deepresearcher.reward.format import extract_answer
from deepresearcher.reward.metrics import cover_em, exact_match, normalize_answer

__all__ = [
    "CLOSED_BOOK_PROMPT",
    "AnswerFn",
    "ContaminationResult",
    "chat_answer_fn",
    "filter_contaminated",
    "read_decisions",
]

if TYPE_CHECKING:
    from deepresearcher.llm.base import ChatClient

logger = logging.getLogger(__name__)

AnswerFn = Callable[[str], Awaitable[str]]
"""Answers one question without tools; called k times per question (sample, don't decode greedily)."""


CLOSED_BOOK_PROMPT = (
    "Answer the question from your own knowledge, without searching. Reply with the answer only, "
    "a few words, no explanation.\n\nQuestion: {question}"
)
"""The closed-book question put to the base policy (``{question}`` is filled in)."""


def chat_answer_fn(
    client: ChatClient, *, temperature: float = 1.0, max_tokens: int = 32, prompt: str = CLOSED_BOOK_PROMPT
) -> AnswerFn:
    """An ``answer_fn`` over any chat client (OpenAI-compatible server, local or embedded model).

    Sampling defaults to temperature 1.0, as k samples of a greedy decoder would all be the same.
    A reply in the agent's ``<answer>…</answer>`` format is unwrapped.
    """

    async def answer(question: str) -> str:
        reply = await client.chat(
            [{"role": "user", "content": prompt.format(question=question)}],
            temperature=temperature,
            max_tokens=max_tokens,
        )
        return extract_answer(reply.text) or reply.text.strip()

    return answer


@dataclass
class ContaminationResult:
    """Tasks kept (never answered correctly) and dropped, in input order, and how many were decided now."""

    kept: list[QATask]
    dropped: list[QATask]
    decided_now: int
    resumed: int


def _default_correct(answer: str, golds: Sequence[str]) -> bool:
    """Cover-EM, except that yes/no golds need an exact match ("no idea" must not count as "no")."""
    for gold in golds:
        if normalize_answer(gold) in {"yes", "no"}:
            if exact_match(answer, [gold]) == 1.0:
                return True
        elif cover_em(answer, [gold]) == 1.0:
            return True
    return False


def _ends_torn(path: Path) -> bool:
    if not path.is_file() or path.stat().st_size == 0:
        return False
    with path.open("rb") as handle:
        handle.seek(-1, 2)
        return handle.read(1) != b"\n"


def read_decisions(path: str | Path) -> dict[str, dict[str, Any]]:
    """Decisions saved so far (id -> record); a torn last line from a killed run is ignored."""
    path = Path(path)
    decisions: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return decisions
    for line_no, line in enumerate(path.read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            logger.warning("%s:%d: unreadable decision line skipped (interrupted write?)", path, line_no)
            continue
        decisions[str(record["id"])] = record
    return decisions


async def filter_contaminated(
    tasks: Sequence[QATask],
    answer_fn: AnswerFn | Callable[[str], str],
    decisions_path: str | Path,
    *,
    k: int = 10,
    concurrency: int = 8,
    is_correct: Callable[[str, Sequence[str]], bool] = _default_correct,
    progress: bool = True,
) -> ContaminationResult:
    """Ask ``answer_fn`` up to ``k`` times per task; drop the task at its first correct answer.

    ``is_correct`` defaults to cover-EM (the answer contains a gold alias), the lenient reading that
    removes more known questions; yes/no golds need an exact match. A synchronous ``answer_fn`` runs
    in a worker thread.
    """
    if k < 1:
        raise ValueError("k must be at least 1")
    path = Path(decisions_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    decisions = read_decisions(path)
    resumed = sum(t.id in decisions for t in tasks)
    todo = list({t.id: t for t in tasks if t.id not in decisions}.values())
    semaphore = asyncio.Semaphore(concurrency)

    is_async = inspect.iscoroutinefunction(answer_fn) or inspect.iscoroutinefunction(type(answer_fn).__call__)

    async def ask(question: str) -> str:
        if is_async:
            return await answer_fn(question)
        return await asyncio.to_thread(answer_fn, question)

    from tqdm.auto import tqdm

    bar = tqdm(total=len(tasks), initial=resumed, desc="contamination", unit="q", disable=not progress)
    if _ends_torn(path):  # a kill mid-write left a torn line; never glue the next record onto it
        with path.open("ab") as out:
            out.write(b"\n")
    with path.open("ab") as out:

        async def decide(task: QATask) -> None:
            async with semaphore:
                record: dict[str, Any] = {"id": task.id, "contaminated": False, "samples": 0, "answer": None}
                for sample in range(1, k + 1):
                    answer = await ask(task.question)
                    record["samples"] = sample
                    if is_correct(answer, task.golds):
                        record.update(contaminated=True, answer=answer)
                        break
            out.write(orjson.dumps(record) + b"\n")
            out.flush()
            decisions[task.id] = record
            bar.update(1)

        running = [asyncio.ensure_future(decide(t)) for t in todo]
        try:
            await asyncio.gather(*running)
        finally:  # on an error or a cancel, stop the other questions before closing the file
            for job in running:
                job.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            bar.close()
    kept = [t for t in tasks if not decisions[t.id]["contaminated"]]
    dropped = [t for t in tasks if decisions[t.id]["contaminated"]]
    logger.info("contamination: kept %d, dropped %d (%d decided now)", len(kept), len(dropped), len(todo))
    return ContaminationResult(kept=kept, dropped=dropped, decided_now=len(todo), resumed=resumed)
