"""Benchmark loaders, training mixes and the contamination filter.

Every benchmark arrives as ``QATask`` (id, source, question, golds, context, metadata), whatever its
file format; ``load_benchmark("hotpotqa", "test")`` is the usual entry point.
"""

from deepresearcher.data.contamination import (
    ContaminationResult,
    chat_answer_fn,
    filter_contaminated,
    read_decisions,
)
from deepresearcher.data.corpus import corpus_from_tasks, load_passages
from deepresearcher.data.formats import (
    ANSWER_SPLIT,
    canonical_source,
    golds_from,
    load_file,
    question_and_golds,
    read_records,
    record_to_task,
)
from deepresearcher.data.mix import PAPER_RATIOS, MixReport, allocate, make_mix, question_key
from deepresearcher.data.registry import (
    BENCHMARKS,
    DATA_DIR_ENV,
    Benchmark,
    HubSplit,
    evaluation_tasks,
    get_benchmark,
    load_benchmark,
    load_hub,
    local_data_dir,
)
from deepresearcher.data.schema import Paragraph, QATask
from deepresearcher.data.verl import to_verl_row, write_verl_parquet

__all__ = [
    "ANSWER_SPLIT",
    "BENCHMARKS",
    "DATA_DIR_ENV",
    "PAPER_RATIOS",
    "Benchmark",
    "ContaminationResult",
    "HubSplit",
    "MixReport",
    "Paragraph",
    "QATask",
    "allocate",
    "canonical_source",
    "chat_answer_fn",
    "corpus_from_tasks",
    "evaluation_tasks",
    "filter_contaminated",
    "get_benchmark",
    "golds_from",
    "load_benchmark",
    "load_file",
    "load_hub",
    "load_passages",
    "local_data_dir",
    "make_mix",
    "question_and_golds",
    "question_key",
    "read_decisions",
    "read_records",
    "record_to_task",
    "to_verl_row",
    "write_verl_parquet",
]
