"""Building a local index: reading a corpus and writing the tantivy index that ``local.LocalIndex`` queries.

The build streams the corpus (memory stays flat whatever its size), commits every ``COMMIT_EVERY``
documents so that ``--resume`` can pick up an interrupted build, and writes, last, the best-score sidecar
(``MAX_SCORES_FILE``) the driven top-k of the query side proves its answers with, then the meta file whose
presence means the index is complete. Bad corpus lines are reported by line number and skipped.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import tantivy

from deepresearcher.errors import DataError
from deepresearcher.web.backends.body_codec import DICTIONARY_SAMPLES, BodyCodec
from deepresearcher.web.backends import local
from deepresearcher.web.backends.local import (
    CHECKPOINT_FILE,
    INDEX_FORMAT,
    MAX_SCORES_FILE,
    META_FILE,
    _best_score,
    _schema,
    _with_analyzer,
)
from deepresearcher.web.html import decode_bytes, html_to_text
from deepresearcher.web.types import split_contents

logger = logging.getLogger(__name__)

MAX_INDEXED_CHARS = 200_000  # text beyond this is not indexed: bounds memory on giant pages


MAX_STORED_HTML = 5_000_000  # larger pages are cut: extraction time grows with size


# The writer's memory budget, shared by its threads, and the documents between commits. Each commit ends
# every thread's in-memory segment, and tantivy's log merge policy rewrites eight segments of a size into one
# in the background: at 21M passages, with 1.5 GB and a commit every 2M, ten segments of ~2M were built and
# eight merged into one of 16.7M while the last millions were indexed and after them (~100 s of the build's
# ~770). With 2.5 GB (a thread's segment holds ~3.6M generated passages) and a commit every 6M, each commit
# ends two segments of ~3M and 21M passages should end as eight segments that no merge joins (the benchmark,
# which does not commit, ends with six: measured). A corpus with a larger vocabulary fills a thread's budget
# with fewer passages, so its segments are smaller and some merging comes back. An interrupted
# build loses at most the 6M documents since its last commit (~3 minutes).
# Two indexing threads: tokenizing and inverting a passage (~25 us) costs several times what the Python
# thread feeding it does, and with one thread the feeder spun waiting; 2M passages built in 56 s against
# 104 s with one (2 cores).
WRITER_HEAP_BYTES = 2_500_000_000


WRITER_THREADS = 2


COMMIT_EVERY = 6_000_000  # documents between commits: what a resumed build can lose at most


# Driven top-k (see LocalIndex._driven_top). A build records the best body score of every word found in at
# least this many bodies (and at most COMMON_WORD_FRACTION of them), and the best title score of every word in
# at least TITLE_SCORE_MIN_DOCS titles (at 21M passages a title list of 2,000 took ~0.65 ms to find its best,
# a third of a query); rarer words' lists are short enough to score when first queried, and are remembered,
# up to MAX_SCORE_CACHE terms.
MAX_SCORE_MIN_DOCS = 2_000


TITLE_SCORE_MIN_DOCS = 100


@dataclass
class CorpusProblem:
    line: int
    reason: str


@dataclass
class BuildStats:
    documents: int = 0
    skipped: int = 0
    seconds: float = 0.0
    problems: list[CorpusProblem] = field(default_factory=list)
    lines: int = 0  # corpus lines read so far
    offset: int = 0  # bytes of the corpus read so far: where a resumed build starts reading


def read_corpus(path: str | Path, stats: BuildStats | None = None) -> Iterator[dict]:
    """Stream documents from a JSONL corpus, reporting bad lines into ``stats`` instead of raising.

    Reading starts at ``stats.offset`` (0, or a resumed build's checkpoint) and keeps ``stats.lines``
    and ``stats.offset`` current, so a checkpoint taken after a document names the line after it.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"Corpus file {path} does not exist.")
    stats = stats if stats is not None else BuildStats()
    with path.open("rb") as lines:
        lines.seek(stats.offset)
        for raw in lines:
            stats.lines += 1
            stats.offset += len(raw)
            if not raw.strip():
                continue
            try:
                doc = orjson.loads(raw)
            except orjson.JSONDecodeError:
                try:  # a line of valid JSON in another encoding: decode leniently and retry
                    doc = orjson.loads(decode_bytes(raw).encode("utf-8", errors="replace"))
                except orjson.JSONDecodeError as exc:
                    _problem(stats, stats.lines, f"not valid JSON ({exc})")
                    continue
            if isinstance(doc, dict) and "url" not in doc and isinstance(doc.get("contents"), str):
                doc = _from_search_r1(doc)
            if not isinstance(doc, dict) or not isinstance(doc.get("url"), str) or not doc["url"].strip():
                _problem(stats, stats.lines, "no 'url' field; every corpus line needs url, title, and text or html "
                         "(or Search-R1's id and contents)")
                continue
            if not isinstance(doc.get("text"), str) and not isinstance(doc.get("html"), str):
                _problem(stats, stats.lines, "neither 'text' nor 'html' is a string")
                continue
            yield doc


def _from_search_r1(doc: dict) -> dict:
    """A Search-R1 / FlashRAG line (``{"id", "contents": "\\"Title\\"\\ntext"}``, as in wiki-18) as url/title/text.

    The id becomes the URL, so ``/retrieve`` answers with the corpus's own ids and browse finds the passage.
    ``/retrieve`` must give ``contents`` back byte for byte, so the text is kept as it follows the first
    newline, and the head before it (``contents_head``) is kept too unless it is the usual ``"Title"\\n``:
    a title with quotes or spaces of its own, or a passage without a title line ("").
    """
    contents = doc["contents"]
    title, _ = split_contents(contents)
    head, newline, text = contents.partition("\n")
    head, text = (head + newline, text) if newline else ("", contents)
    line = {"url": str(doc.get("id", "")), "title": title, "text": text}
    if head != f'"{title}"\n':
        line["contents_head"] = head
    return line


def _problem(stats: BuildStats, line: int, reason: str) -> None:
    stats.skipped += 1
    if len(stats.problems) < 20:
        stats.problems.append(CorpusProblem(line, reason))
    logger.warning("corpus line %d skipped: %s", line, reason)


def resume_point(out_dir: str | Path, corpus: str | Path) -> BuildStats | None:
    """The counts of an interrupted build of ``corpus`` into ``out_dir`` at its last commit, or None.

    None when there is no checkpoint, or it belongs to another corpus file (name and size differ).
    Pass the result to ``read_corpus`` and ``build_index(..., resume=True)`` to go on from there.
    """
    path = Path(out_dir) / CHECKPOINT_FILE
    if not path.is_file():
        return None
    saved = orjson.loads(path.read_bytes())
    corpus = Path(corpus)
    if (saved.get("corpus") != corpus.name or saved.get("corpus_bytes") != corpus.stat().st_size
            or saved.get("format", 3) != INDEX_FORMAT):
        return None
    return BuildStats(documents=saved["documents"], skipped=saved["skipped"], lines=saved["lines"],
                      offset=saved["offset"])


def _body(doc: dict) -> str:
    """The text a document is searched by: its ``text``, or its HTML's main text."""
    if isinstance(doc.get("text"), str):
        return doc["text"]
    return html_to_text(doc["html"][:MAX_STORED_HTML]) if isinstance(doc.get("html"), str) else ""


def _document(doc: dict, body: str, codec: BodyCodec) -> tantivy.Document:
    html = doc.get("html") if isinstance(doc.get("html"), str) else None
    title = doc.get("title") if isinstance(doc.get("title"), str) else ""
    body = body[:MAX_INDEXED_CHARS]
    fields = {"url": doc["url"], "title": title, "body": body, "body_z": codec.compress(body)}
    if html:
        fields["html"] = html[:MAX_STORED_HTML].encode("utf-8", errors="replace")
    if isinstance(doc.get("contents_head"), str):
        fields["contents_head"] = doc["contents_head"].encode()
    return tantivy.Document(**fields)


def build_index(docs: Iterable[dict], out_dir: str | Path, stats: BuildStats | None = None,
                heap_bytes: int = WRITER_HEAP_BYTES, on_progress: Callable[[int], None] | None = None, *,
                threads: int = WRITER_THREADS, resume: bool = False, corpus: str | Path | None = None,
                commit_every: int = COMMIT_EVERY) -> BuildStats:
    """Index documents (dicts with url, title, text or html) into ``out_dir``; returns counts and time.

    Without ``resume`` an existing index there is replaced. With ``corpus`` (the file ``docs`` is read
    from by ``read_corpus`` with the same ``stats``) the build commits every ``commit_every``
    documents and records where it was, so ``resume_point`` can restart it from its last commit.
    The bodies' compression dictionary is trained on the first ``DICTIONARY_SAMPLES`` documents (at
    most ``commit_every``; a resumed build reuses the one saved), read before the first is indexed.
    """
    stats = stats if stats is not None else BuildStats()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not resume:
        for old in out_dir.iterdir():  # rebuild from scratch: tantivy would otherwise append to an old index
            if old.is_file():
                old.unlink()
    (out_dir / META_FILE).unlink(missing_ok=True)
    (out_dir / MAX_SCORES_FILE).unlink(missing_ok=True)  # it describes the finished index, written at the end
    started = time.perf_counter()
    index = _with_analyzer(tantivy.Index(_schema(), path=str(out_dir), reuse=resume))
    writer = index.writer(heap_size=heap_bytes, num_threads=threads)
    docs = iter(docs)
    if resume:
        codec, first = BodyCodec.load(out_dir), []
    else:
        samples = min(DICTIONARY_SAMPLES, commit_every)  # never later than the first checkpoint
        first = [(doc, _body(doc)) for doc in itertools.islice(docs, samples)]
        codec = BodyCodec.trained_on([body for _doc, body in first])
        codec.save(out_dir)
    # ``stats`` describes the corpus read so far, which is ahead of the documents indexed while the
    # first ones are: no checkpoint before they are all in.
    in_sync_from = stats.documents + len(first)
    for doc, body in itertools.chain(first, ((doc, _body(doc)) for doc in docs)):
        writer.add_document(_document(doc, body, codec))
        stats.documents += 1
        if stats.documents % 1000 == 0:
            if on_progress:
                on_progress(stats.documents)
            if corpus is not None and stats.documents % commit_every == 0 and stats.documents >= in_sync_from:
                writer.commit()
                _checkpoint(out_dir, Path(corpus), stats)
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    _write_max_scores(index, out_dir)
    stats.seconds = time.perf_counter() - started
    (out_dir / CHECKPOINT_FILE).unlink(missing_ok=True)
    (out_dir / META_FILE).write_bytes(orjson.dumps({"format": INDEX_FORMAT, "documents": stats.documents,
                                                    "skipped": stats.skipped,
                                                    "build_seconds": round(stats.seconds, 3)}))
    return stats


def _write_max_scores(index: tantivy.Index, out_dir: Path) -> None:
    """Record the best body score of each word in at least ``MAX_SCORE_MIN_DOCS`` bodies and at most
    ``COMMON_WORD_FRACTION`` of them, and the best (boosted) title score of each word in at least
    ``TITLE_SCORE_MIN_DOCS`` titles: the bounds ``LocalIndex._driven_top`` proves its top-k with (more common
    words are left out of queries, rarer ones are cheap to score when first queried).

    One top-1 search per word: about 3 s at 5M passages (a term-dictionary walk, then those posting lists once).
    """
    searcher = index.searcher()
    if searcher.num_docs < local.DRIVEN_MIN_DOCS:  # read when called: the query side's setting
        return  # the whole query answers on a small index
    low, high = MAX_SCORE_MIN_DOCS, searcher.num_docs * local.COMMON_WORD_FRACTION
    scores = {"body": {word: _best_score(searcher, index.schema, "body", word)
                       for word, docs in searcher.terms_with_prefix("body", "") if low <= docs <= high},
              "title": {word: _best_score(searcher, index.schema, "title", word)
                        for word, docs in searcher.terms_with_prefix("title", "") if docs >= TITLE_SCORE_MIN_DOCS}}
    (out_dir / MAX_SCORES_FILE).write_bytes(orjson.dumps(scores))


def _checkpoint(out_dir: Path, corpus: Path, stats: BuildStats) -> None:
    """Record the state of the commit just made (written atomically: a crash leaves the old or the new)."""
    tmp = out_dir / (CHECKPOINT_FILE + ".tmp")
    tmp.write_bytes(orjson.dumps({"format": INDEX_FORMAT, "corpus": corpus.name, "corpus_bytes": corpus.stat().st_size,
                                  "documents": stats.documents, "skipped": stats.skipped,
                                  "lines": stats.lines, "offset": stats.offset}))
    tmp.replace(out_dir / CHECKPOINT_FILE)
