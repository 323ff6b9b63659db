"""The offline evaluation corpus: real Wikipedia paragraphs, so the whole eval runs on real questions here.

It gathers the paragraphs shipped with the HotpotQA, 2Wiki and MuSiQue dev questions (and the HippoRAG
corpora next to them) plus the Wikipedia summaries of the vital articles, merges paragraphs of the same
title into one page (a Wikipedia article is one page, whatever dataset quoted it), and writes
``corpus.jsonl`` (``url``, ``title``, ``text``: the input of ``deepresearcher index build``) and the
tantivy index beside it::

    <out>/corpus.jsonl      one page per title, url https://en.wikipedia.org/wiki/<Title>
    <out>/index/            search.backend=local search.index=<out>/index
    <out>/sources.json      what went in: file, questions or passages, pages contributed

Only evaluation questions' own paragraphs are used, never their answers; the distractor paragraphs
that ship with them stay in, so retrieval is not trivial.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import orjson

from deepresearcher.data import (
    Paragraph,
    corpus_from_tasks,
    load_benchmark,
    load_passages,
    local_data_dir,
)
from deepresearcher.errors import DataError

__all__ = ["CORPUS_SOURCES", "PASSAGE_FILES", "CorpusReport", "build_eval_corpus", "wiki_url"]

logger = logging.getLogger(__name__)

# (benchmark, split) whose questions ship paragraphs; every one is read when its file is present.
CORPUS_SOURCES: tuple[tuple[str, str], ...] = (
    ("hotpotqa", "flashrag_dev"),
    ("hotpotqa", "distractor_dev"),
    ("hotpotqa", "hipporag_train"),
    ("2wiki", "flashrag_dev"),
    ("musique", "flashrag_dev"),
    ("musique", "hipporag_train"),
)
# Passage corpora under the data directory (HippoRAG's and the Wikipedia vital-article summaries).
PASSAGE_FILES: tuple[str, ...] = (
    "hotpotqa/hipporag_hotpotqa_train_corpus.json",
    "2wikimultihopqa/hipporag_2wikimultihopqa_corpus.json",
    "musique/hipporag_musique_train_corpus.json",
    "wikipedia_vital_l4_en/summaries_en-us.json",
)


@dataclass
class CorpusReport:
    """What a build produced: pages, paragraphs merged into them, per-source counts, index time."""

    out: Path
    pages: int = 0
    paragraphs: int = 0
    sources: dict[str, dict[str, int]] = field(default_factory=dict)
    index_seconds: float = 0.0

    @property
    def corpus_path(self) -> Path:
        return self.out / "corpus.jsonl"

    @property
    def index_dir(self) -> Path:
        return self.out / "index"


def wiki_url(title: str) -> str:
    """The English Wikipedia URL of a title (spaces as underscores, the rest percent-encoded)."""
    return "https://en.wikipedia.org/wiki/" + quote(title.strip().replace(" ", "_"), safe="_(),'-.")


class _Pages:
    """Paragraphs grouped by title; a paragraph already on its page (same text) is not repeated."""

    def __init__(self) -> None:
        self.texts: dict[str, list[str]] = {}
        self.paragraphs = 0

    def add(self, paragraphs: Iterable[Paragraph]) -> int:
        added = 0
        for p in paragraphs:
            title = p.title.strip() or p.text[:60]
            texts = self.texts.setdefault(title, [])
            text = p.text.strip()
            if text and text not in texts:
                texts.append(text)
                added += 1
        self.paragraphs += added
        return added


def build_eval_corpus(out: str | Path, data_dir: str | Path | None = None, *, index: bool = True) -> CorpusReport:
    """Write ``<out>/corpus.jsonl`` from every source present under ``data_dir``, then index it.

    ``data_dir`` defaults to ``data.local_data_dir()`` (``$DEEPRESEARCHER_DATA_DIR``, else ``../shared/datasets``
    beside the repository); a missing source file is skipped with a log line,
    but finding none at all is an error (the data directory is wrong).
    """
    root = local_data_dir(data_dir)
    if root is None or not root.is_dir():
        raise DataError(
            f"Data directory {root} not found; pass data_dir= (--data-dir) or set DEEPRESEARCHER_DATA_DIR "
            "to the folder holding hotpotqa/, 2wikimultihopqa/, musique/ and wikipedia_vital_l4_en/."
        )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    report = CorpusReport(out=out)
    pages = _Pages()
    for name, split in CORPUS_SOURCES:
        try:
            tasks = load_benchmark(name, split, data_dir=root, hub=False)
        except DataError as exc:
            logger.info("corpus source %s/%s skipped: %s", name, split, exc)
            continue
        added = pages.add(corpus_from_tasks(tasks))
        report.sources[f"{name}:{split}"] = {"questions": len(tasks), "paragraphs_added": added}
    for rel in PASSAGE_FILES:
        path = root / rel
        if not path.is_file():
            logger.info("corpus file %s absent, skipped", path)
            continue
        passages = load_passages(path)
        added = pages.add(passages)
        report.sources[rel] = {"passages": len(passages), "paragraphs_added": added}
    if not pages.texts:
        raise DataError(f"No corpus source found under {root}; is it the shared datasets folder?")
    with report.corpus_path.open("wb") as handle:
        for title, texts in pages.texts.items():
            handle.write(orjson.dumps({"url": wiki_url(title), "title": title, "text": "\n\n".join(texts)}) + b"\n")
    report.pages, report.paragraphs = len(pages.texts), pages.paragraphs
    if index:
        from deepresearcher.web.backends.local_build import build_index, read_corpus

        stats = build_index(read_corpus(report.corpus_path), report.index_dir)
        report.index_seconds = round(stats.seconds, 2)
    (out / "sources.json").write_bytes(
        orjson.dumps(
            {"pages": report.pages, "paragraphs": report.paragraphs, "sources": report.sources,
             "index_seconds": report.index_seconds},
            option=orjson.OPT_INDENT_2,
        )
    )
    return report
