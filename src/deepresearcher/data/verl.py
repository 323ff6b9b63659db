"""Write tasks in DeepResearcher's verl parquet format, the one its RL trainer reads.

One row per question, columns as in the paper's ``data/{train,dev,test}.parquet``::

    data_source   str                      "hotpotqa"
    prompt        list<{content, role}>    [{"role": "user", "content": question}]
    ability       str                      "search & question answering"
    reward_model  {ground_truth, style}    {"ground_truth": "alias 1<|answer_split|>alias 2", "style": "rule"}
    extra_info    {index, split}           {"index": task id, "split": "train"}

``data_source`` is spelled as the original trainer's reward dispatch expects it (``Bamboogle``; the
other sources as our canonical names), so its ``_default_compute_score`` scores our files. Reading it
back is ``formats.load_file`` (it recognises the columns and canonicalises the source), so the round
trip keeps id, source, question, golds and split.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from deepresearcher.data.formats import ANSWER_SPLIT
from deepresearcher.data.schema import QATask
from deepresearcher.errors import DataError

__all__ = ["ABILITY", "ORIGINAL_SOURCE_NAMES", "to_verl_row", "write_verl_parquet"]

ABILITY = "search & question answering"

ORIGINAL_SOURCE_NAMES = {"bamboogle": "Bamboogle"}
"""Canonical sources the original DeepResearcher trainer spells differently (its reward dispatch matches exactly)."""


def to_verl_row(task: QATask) -> dict[str, Any]:
    """One task as a verl row; aliases containing the separator would split wrongly, so they are refused."""
    if any(ANSWER_SPLIT in g for g in task.golds):
        raise DataError(f"task {task.id}: a gold answer contains {ANSWER_SPLIT!r}; verl format cannot hold it.")
    return {
        "data_source": ORIGINAL_SOURCE_NAMES.get(task.source, task.source),
        "prompt": [{"content": task.question, "role": "user"}],
        "ability": ABILITY,
        "reward_model": {"ground_truth": ANSWER_SPLIT.join(task.golds), "style": "rule"},
        "extra_info": {"index": task.id, "split": task.split},
    }


def write_verl_parquet(tasks: Sequence[QATask], path: str | Path) -> Path:
    """Write tasks as a verl parquet file (parent folders are created); returns the path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    schema = pa.schema(
        [
            ("data_source", pa.string()),
            ("prompt", pa.list_(pa.struct([("content", pa.string()), ("role", pa.string())]))),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("ground_truth", pa.string()), ("style", pa.string())])),
            ("extra_info", pa.struct([("index", pa.string()), ("split", pa.string())])),
        ]
    )
    table = pa.Table.from_pylist([to_verl_row(t) for t in tasks], schema=schema)
    pq.write_table(table, path)
    return path
