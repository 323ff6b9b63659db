"""Passage corpora shipped next to QA sets, as ``Paragraph`` lists ready for indexing.

Formats read (``.json``, ``.jsonl`` or ``.parquet``):

* a list of ``{"title", "text"}`` records (HippoRAG's 2Wiki and MuSiQue corpora; also ``contents``);
* a mapping ``title -> [sentences]`` (HippoRAG's HotpotQA corpus);
* a mapping ``title -> {"title", "extract", ...}`` (Wikipedia REST summaries).

``corpus_from_tasks`` turns the paragraphs shipped with questions (HotpotQA, 2Wiki, MuSiQue) into
one deduplicated corpus, so an offline index can answer real multi-hop questions.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from deepresearcher.data.formats import read_records
from deepresearcher.data.schema import Paragraph, QATask
from deepresearcher.errors import DataError

__all__ = ["corpus_from_tasks", "load_passages"]


def _from_mapping(data: dict[str, Any], path: Path) -> list[Paragraph]:
    out = []
    for title, value in data.items():
        if isinstance(value, list):
            text = "".join(value).strip()
        elif isinstance(value, dict):
            text = str(value.get("extract") or value.get("text") or "")
            title = str(value.get("title") or title)
        elif isinstance(value, str):
            text = value
        else:
            raise DataError(f"{path}: entry {title!r} is neither text, a sentence list nor a record.")
        if text.strip():
            out.append(Paragraph(title=title, text=text.strip()))
    return out


def load_passages(path: str | Path, limit: int | None = None) -> list[Paragraph]:
    """The passages of a corpus file, in file order; empty passages are skipped."""
    path = Path(path)
    if path.suffix.lower() == ".json":
        if not path.is_file():
            raise DataError(f"{path} does not exist; pass an existing corpus file.")
        data = orjson.loads(path.read_bytes())
        if isinstance(data, dict):
            return _from_mapping(data, path)[:limit]
        records: Iterable[Any] = data
    else:
        records = read_records(path)
    out: list[Paragraph] = []
    for row, record in enumerate(records):
        if not isinstance(record, dict):
            raise DataError(f"{path} row {row}: expected a {{title, text}} record.")
        text = record.get("text", record.get("contents", record.get("paragraph_text")))
        if text is None:
            raise DataError(f"{path} row {row}: no text field (text, contents or paragraph_text).")
        if str(text).strip():
            out.append(Paragraph(title=str(record.get("title", "")), text=str(text).strip()))
        if limit is not None and len(out) >= limit:
            break
    return out


def corpus_from_tasks(tasks: Iterable[QATask]) -> list[Paragraph]:
    """Every distinct (title, text) paragraph shipped with the tasks, without their evidence flags."""
    seen: dict[tuple[str, str], Paragraph] = {}
    for task in tasks:
        for p in task.context:
            seen.setdefault((p.title, p.text), Paragraph(title=p.title, text=p.text))
    return list(seen.values())
