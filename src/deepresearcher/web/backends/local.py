"""The local search engine: a tantivy (BM25) index over any corpus, answering like a web search API.

The index stores each document's url, title and clean text (zstd-compressed, see ``body_codec``;
and the raw HTML when the corpus has it), so it is both the search backend and the page store that
``browse_webpage`` reads from.

Corpus input is JSONL with ``url``, ``title`` and ``text`` or ``html``, or Search-R1's
``{"id", "contents"}`` lines (wiki-18). It is streamed: memory stays
flat whatever the corpus size. Bad lines (no url, not JSON, not UTF-8) are reported by line number
and skipped, never fatal.
"""

from __future__ import annotations

import itertools
import logging
import mmap
import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import tantivy

from deepresearcher.errors import IndexNotFoundError
from deepresearcher.text import fold_unicode
from deepresearcher.web.backends.body_codec import BodyCodec
from deepresearcher.web.types import Page, Passage, SearchHit

logger = logging.getLogger(__name__)

META_FILE = "deepresearcher-index.json"  # written last: its presence means the index is complete
CHECKPOINT_FILE = "deepresearcher-build.json"  # the last commit of a build in progress (for --resume)
MAX_SCORES_FILE = "deepresearcher-max-scores.json"  # each frequent body word's best BM25 score (see LocalIndex.top)
# 2: title and body are folded to ASCII ("Café Zürich" matches "cafe zurich").
# 3: title and body keep term frequencies without positions (bags of words, a fifth smaller and faster).
# 4: bodies stored as zstd frames with a dictionary trained on the corpus (``body_codec``): the index
#    is ~0.8x the corpus instead of 1.13x. Format 3 indexes are still read. Later format-4 builds also
#    keep a Search-R1 line's contents head where it is not `"Title"\n` (``contents_head``); indexes
#    without that field render contents as `"Title"\ntext`.
# An index of another format is refused with a rebuild hint (the default world rebuilds its own).
INDEX_FORMAT = 4
READABLE_FORMATS = (3, 4)
_FOLDED = "deepresearcher_folded"  # the analyzer's name, stored in the schema
_LONG_WORD = 40  # the analyzer drops words this long or longer
COMMON_WORD_FRACTION = 0.1  # a query word in more than this share of the documents is dropped (see top)
# Driven top-k (see LocalIndex._driven_top): the build records the best scores of frequent words
# (local_build.MAX_SCORE_MIN_DOCS); rarer words' are found when first queried and remembered, up to this many.
MAX_SCORE_CACHE = 200_000
# The driven evaluation is used when its candidates times the lists each is sought in are at most this
# share of the postings the whole query would score (at 5M passages the driven pass was faster than the
# whole query over the benchmark's queries at shares of 0.1 to 1.8).
DRIVEN_MAX_COST = 1.0
# ... on an index of at least this many documents. Measured per query (CPU time, separate passes over the
# benchmark's 2,000 queries): at 1M passages the driven pass was slower than the whole query for all but
# the 10% of queries with the most postings; at 5M it was faster in every tenth, from 1.6x for the
# cheapest queries to 1.3x for the dearest.
DRIVEN_MIN_DOCS = 2_000_000
# The second pass (see LocalIndex._driven_top) is used when its intersections' shortest lists times their
# sizes are at most this share of the whole query's postings; at 5M passages it beat the whole query on
# average at every such share the benchmark's queries had, so this only stops pathological queries.
SECOND_MAX_COST = 2.0
DRIVEN_MAX_WORDS = 6  # more distinct words found in bodies: the whole query (the second pass enumerates term sets)
TITLE_BOOST = 2.0
# The driven top-k's candidates are the documents of the terms (a word in a field) with the highest best scores,
# taken until they are this many times k documents: at 21M passages, the short titles of the query's rarer words.
# Against the previous candidates (every query word's title and the rarest word's body), 21M passages, the
# benchmark's 2,000 queries, CPU time alternating per query: p50 3.28 -> 2.31 ms, p99 17.4 -> 14.2 ms;
# 1 to 200 times k gave the same within the machine's noise.
GENERATOR_MIN_DOCS = 50
# Bounds are compared with the k-th score less this relative slack: tantivy sums scores in 32-bit floats,
# so a document's sum may round a few units in the last place above the sum of the bests.
BOUND_SLACK = 1e-5
# ``preload`` reads into the OS page cache what every query reads (posting lists, term dictionaries, field norms),
# then the document store that hits are fetched from, each while the files so far take at most this share of
# the machine's memory (page cache: the OS can take it back), and keeps them mapped (see ``_Resident``).
_QUERY_FILE_SUFFIXES = (".idx", ".term", ".fieldnorm")
_STORE_SUFFIX = ".store"
PRELOAD_MAX_MEMORY_SHARE = 0.5
# Alphanumeric runs, as tantivy's tokenizer splits: a query word it would split (``a_b``) would become
# a phrase query, which the position-free index cannot answer.
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def _schema() -> tantivy.Schema:
    """url (exact), title and body (BM25, term frequencies without positions), the body compressed and raw
    HTML (stored only).

    No positions: queries are bags of words (no phrases), snippets re-tokenize the stored text, and
    positions would be a fifth of the index and of the build time. The body is stored as a zstd frame
    (``body_z``, see ``body_codec``), not by tantivy's doc store, which barely compresses short passages.
    """
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("url", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("title", stored=True, tokenizer_name=_FOLDED, index_option="freq")
    builder.add_text_field("body", stored=False, tokenizer_name=_FOLDED, index_option="freq")
    builder.add_bytes_field("body_z", stored=True, indexed=False)
    builder.add_bytes_field("html", stored=True, indexed=False)
    builder.add_bytes_field("contents_head", stored=True, indexed=False)  # see ``local_build._from_search_r1``
    return builder.build()


def _with_analyzer(index: tantivy.Index) -> tantivy.Index:
    """Register the title/body analyzer: tantivy's default (simple tokens, long ones dropped,
    lowercase) plus ASCII folding, as the answer metrics fold. tantivy keeps only its name on disk,
    so every opened index needs it again."""
    analyzer = (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).filter(tantivy.Filter.remove_long(_LONG_WORD))
                .filter(tantivy.Filter.lowercase()).filter(tantivy.Filter.ascii_fold()).build())
    index.register_tokenizer(_FOLDED, analyzer)
    return index


def index_format(index_dir: str | Path) -> int | None:
    """The format of the index in ``index_dir`` (1 for those written before formats), or None if there is none."""
    meta = Path(index_dir) / META_FILE
    return orjson.loads(meta.read_bytes()).get("format", 1) if meta.is_file() else None




















def _term(schema: tantivy.Schema, field_name: str, word: str) -> tantivy.Query:
    return tantivy.Query.term_query(schema, field_name, word, index_option="freq")


def _best_score(searcher: tantivy.Searcher, schema: tantivy.Schema, field_name: str, word: str) -> float:
    """The highest score ``word`` gives any document in ``field_name`` (0.0 if none has it), with the title's boost."""
    query = _term(schema, field_name, word)
    if field_name == "title":
        query = tantivy.Query.boost_query(query, TITLE_BOOST)
    hits = searcher.search(query, 1, count=False).hits
    return hits[0][0] if hits else 0.0


@dataclass(frozen=True)
class _Term:
    """A query word in one field, as the driven top-k (``LocalIndex._driven_top``) weighs it."""

    field: str  # "title" or "body"
    word: str
    docs: int  # documents with the word in the field: the length of its posting list
    best: float  # the highest score the term gives any document


def _reaching_sets(terms: list[_Term], threshold: float) -> list[list[_Term]]:
    """The smallest sets of ``terms`` whose best scores sum to at least ``threshold``: a document that reaches
    it with these terms alone has all the terms of one of the sets.

    Depth first over the terms by best score, highest first: a set is recorded when its last (smallest)
    term takes it over the threshold, so leaving out any of its terms falls short; a branch stops when
    all the terms left could not take it there.
    """
    ordered = sorted(terms, key=lambda t: -t.best)
    left = list(itertools.accumulate(t.best for t in reversed(ordered)))[::-1]  # left[i]: sum of ordered[i:]
    sets: list[list[_Term]] = []

    def extend(start: int, chosen: list[_Term], total: float) -> None:
        for i in range(start, len(ordered)):
            if total + left[i] < threshold:
                return
            if total + ordered[i].best >= threshold:
                sets.append([*chosen, ordered[i]])
            else:
                extend(i + 1, [*chosen, ordered[i]], total + ordered[i].best)

    extend(0, [], 0.0)
    return sets




def _read_max_scores(path: Path) -> dict[tuple[str, str], float]:
    """The recorded best scores by (field, word); an index built before titles were recorded has body words only."""
    if not path.is_file():
        return {}  # built before best scores were recorded: each is found when first needed
    recorded = orjson.loads(path.read_bytes())
    if recorded and not all(isinstance(v, dict) for v in recorded.values()):
        recorded = {"body": recorded}
    return {(field_name, word): score for field_name, scores in recorded.items() for word, score in scores.items()}


def _read_through(files: list[Path]) -> None:
    """Read ``files`` once from start to end (into the OS page cache), 16 MB at a time."""
    buffer = bytearray(1 << 24)
    for path in files:
        with path.open("rb", buffering=0) as f:
            while f.readinto(buffer):
                pass


class _Resident:
    """Files read into the OS page cache and kept mapped into this process for as long as it holds them.

    Why mapped: page cache that no process maps is what a kernel reclaims first, and some kernels reclaim it
    merely for being cold. This VM's runs DAMON's proactive reclaim (``/sys/kernel/mm/damon``: regions
    accessed at most once per 5 s for a minute are paged out; anonymous and mapped pages are exempt): a 1 GB
    file read once lost 30% of its pages within 3 minutes while a mapped one kept them all, and a 5M-passage
    index preloaded by ``read()`` took 0.13-0.29 disk reads (major faults) a query after 90 s idle, none when
    mapped. The document store is the most exposed: queries read it in scattered 16 KB blocks, the rest stays cold.
    ``MAP_POPULATE`` enters the cached pages in this process's page tables; they remain clean file pages the
    OS drops when memory is really short. A file ``mmap`` cannot map (an empty one, or no ``MAP_POPULATE``
    on this platform) is only read through.
    """

    def __init__(self, files: list[Path]) -> None:
        _read_through(files)  # sequential reads fill the cache fastest; mapping then only fills page tables
        self.maps: list[mmap.mmap] = []
        populate = getattr(mmap, "MAP_POPULATE", None)
        if populate is None:
            return
        for path in files:
            with path.open("rb") as f:
                try:
                    self.maps.append(mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED | populate, prot=mmap.PROT_READ))
                except (OSError, ValueError):  # empty, or not mappable here: read through only
                    pass

    def close(self) -> None:
        for mapped in self.maps:
            mapped.close()
        self.maps = []




@dataclass
class StoredDocument:
    """What the index keeps of a document: its body decompressed, its HTML (if the corpus had it) as stored
    (decoded only by ``get_page``: a search hit needs the body, not a page of HTML)."""

    url: str
    title: str
    body: str
    html: bytes | None
    contents_head: str | None = None  # a Search-R1 line's own head, where it is not `"Title"\n`


class LocalIndex:
    """A built index, opened once: BM25 search with query-aware snippets, and page lookup by URL."""

    def __init__(self, index_dir: str | Path, snippet_chars: int = 240, *, driven: bool = True) -> None:
        """``driven=False`` answers every query with the whole query (the same ranking, slower; see ``top``)."""
        index_dir = Path(index_dir)
        if (index_dir / CHECKPOINT_FILE).is_file():
            raise IndexNotFoundError(f"The index build in {index_dir} was interrupted; finish it with `deepresearcher "
                                     f"index build --corpus FILE --out {index_dir} --resume`.")
        found = index_format(index_dir)
        if found is None:
            raise IndexNotFoundError(
                f"No search index in {index_dir}; build one with `deepresearcher index build --corpus FILE "
                f"--out {index_dir}` (or omit --index to use the default world)."
            )
        if found not in READABLE_FORMATS:
            raise IndexNotFoundError(
                f"The index in {index_dir} has format {found}; this deepresearcher reads formats "
                f"{READABLE_FORMATS[0]}-{READABLE_FORMATS[-1]} (accents folded, no positions). Rebuild it: "
                f"`deepresearcher index build --corpus FILE --out {index_dir}`."
            )
        self.dir = index_dir
        self._index = _with_analyzer(tantivy.Index.open(str(index_dir)))
        self._codec = BodyCodec.load(index_dir) if found >= 4 else None  # format 3 stored bodies as text
        self._schema = self._index.schema
        self._searcher = self._index.searcher()
        self.snippet_chars = snippet_chars
        self.driven = driven
        self._recorded_best = _read_max_scores(index_dir / MAX_SCORES_FILE)  # (field, word) -> best score
        self._found_best: dict[tuple[str, str], float] = {}  # (field, word) not recorded at build, found when first queried
        self.top_paths: Counter[str] = Counter()  # how top() answered: "driven", "driven+second", "whole"
        self._resident: list[_Resident] = []  # what ``preload`` keeps mapped, while this index is open

    @property
    def num_docs(self) -> int:
        return self._searcher.num_docs

    @property
    def num_segments(self) -> int:
        return self._searcher.num_segments

    def preload(self) -> int:
        """Read the files every query reads (postings, term dictionaries, field norms), then the document store,
        once each, so that the OS page cache holds them; returns the bytes read. Each part is read only while
        all read so far stays within ``PRELOAD_MAX_MEMORY_SHARE`` of the machine's memory.

        Why: on a cold cache a wiki-size index answers its first thousands of queries from the disk. 21M
        passages, 2,000 queries after the caches were dropped: p99 345 ms wall with only the postings
        preloaded (each hit's document a random read), 13-16 ms warm, at the same p50. What is read stays
        mapped until the index is closed or preloaded again, so that the OS keeps it cached (``_Resident``).
        """
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        files = list(self.dir.iterdir())
        query_files = [p for p in files if p.suffix in _QUERY_FILE_SUFFIXES]
        store_files = [p for p in files if p.suffix == _STORE_SUFFIX]
        for resident in self._resident:  # a second preload replaces the first
            resident.close()
        self._resident = []
        loaded = 0
        for part, part_files in (("postings", query_files), ("document store", store_files)):
            size = sum(p.stat().st_size for p in part_files)
            if loaded + size > PRELOAD_MAX_MEMORY_SHARE * memory:
                logger.info("Not preloading the %s of the index in %s (%.1f GB): over %d%% of the memory.",
                            part, self.dir, size / 1e9, PRELOAD_MAX_MEMORY_SHARE * 100)
                break
            self._resident.append(_Resident(part_files))
            loaded += size
        return loaded

    def top(self, query: str, top_k: int) -> tuple[tantivy.Query | None, list[tuple[float, tantivy.DocAddress]]]:
        """The parsed query and its best ``top_k`` ``(score, address)`` pairs; any text is a valid query.

        BM25 over title (boosted) and body. Words found in more than ``COMMON_WORD_FRACTION`` of the
        documents are left out of a query that has rarer words found in the index: on a wiki-size index they are most of
        the time spent (every posting list is the size of the corpus) and barely move BM25 (their idf is
        near zero); the p99 latency at 1M passages falls 4x. Matches are not counted (``count=False``).

        The top-k is then found by ``_driven_top`` when that is cheaper, with the same hits and scores as
        the whole query (``driven=False``, or ``top_whole``), and by the whole query otherwise.
        """
        words, freq = self._query_words(query)
        top_k = min(top_k, self._searcher.num_docs)  # a top_k above the index size asks for every match
        if not words or top_k <= 0:
            return None, []
        parsed = self._parse(words)
        found = self._driven_top(words, freq, top_k) if self.driven else None
        if found is None:
            self.top_paths["whole"] += 1
            found = self._searcher.search(parsed, top_k, count=False).hits
        return parsed, found

    def top_whole(self, query: str, top_k: int) -> tuple[tantivy.Query | None, list[tuple[float, tantivy.DocAddress]]]:
        """``top`` by the whole query, every posting list of its words scored (the reference ``top`` must equal)."""
        words, _freq = self._query_words(query)
        if not words or top_k <= 0:
            return None, []
        parsed = self._parse(words)
        return parsed, self._searcher.search(parsed, top_k, count=False).hits

    def _query_words(self, query: str) -> tuple[list[str], dict[str, int]]:
        """The query's distinct words as the analyzer cuts and folds them, less the common ones (see ``top``),
        and the number of bodies each is in."""
        words = list(dict.fromkeys(_WORD.findall(fold_unicode(query).lower())))  # the parser drops repeats too
        freq = {w: self._searcher.doc_freq("body", w) for w in words}
        rarer = [w for w in words if freq[w] <= self._searcher.num_docs * COMMON_WORD_FRACTION]
        if any(freq[w] for w in rarer):  # only when a rarer word is in the index, or nothing would match
            words = rarer
        return words, freq

    def _parse(self, words: list[str]) -> tantivy.Query:
        return self._index.parse_query(" ".join(words), ["title", "body"], field_boosts={"title": TITLE_BOOST})

    def _driven_top(self, words: list[str], freq: dict[str, int],
                    top_k: int) -> list[tuple[float, tantivy.DocAddress]] | None:
        """The whole query's top-k found by scoring few candidates, or None where the whole query is cheaper.

        Why: the whole query scores every posting of every word, and a query of 2-4 frequent words plus a
        rarer one spends nearly all its time in long lists, which block-max WAND cannot skip (any two of
        them can outscore the k-th hit). Yet the best hits are found among the documents of the terms
        (a word in the title, or in the body) that score highest alone: a query word in a short title.

        How, exactly (MaxScore's split of essential and bounded terms, in two passes): (1) candidates are
        the documents of the *generating* terms, those with the highest best scores taken until they hold
        ``GENERATOR_MIN_DOCS`` x k documents (where scoring them would cost too much, or they give fewer than
        k hits: every title term and the rarest body word); each candidate is scored with the whole query by
        seeking the other lists to it (tantivy's ``Must`` candidates with one nested ``Should`` per term), so
        the long lists are visited only at the candidates. (2) A document outside the candidates scores at
        most the sum of the best scores of the other terms it has (recorded at build for frequent words,
        ``MAX_SCORES_FILE``, the rest found when first queried); if all of them together stay below the k-th score the top-k is
        proven (``top_paths["driven"]``). (3) Otherwise every smallest set of those terms whose best scores
        reach the k-th score is intersected (documents with all of its terms) and scored the same way, and
        the two top-k merge (``"driven+second"``). Scores are the whole query's (the same terms summed in
        the same order: equal to the bit on all 2,000 benchmark queries at 1M, 5M and 21M passages), and
        ties go to the lower address as in tantivy. On a small index (``DRIVEN_MIN_DOCS``), where the
        candidates would cost more than the whole query (``DRIVEN_MAX_COST``, ``SECOND_MAX_COST``) or
        there are fewer than k of them, the whole query answers (``"whole"``).
        """
        present = [w for w in words if freq[w]]
        if len(words) < 2 or not present or self._searcher.num_docs < DRIVEN_MIN_DOCS:
            return None  # one word, or none in any body (the candidates would be the whole query), or a small index
        if not all(w.isascii() and len(w) < _LONG_WORD for w in words):
            return None  # a word the analyzer would still change: only the parser finds its indexed form
        if len(present) > DRIVEN_MAX_WORDS:
            return None
        terms = [_Term("title", w, docs, self._best_score("title", w))
                 for w in words if (docs := self._searcher.doc_freq("title", w))]
        terms += [_Term("body", w, freq[w], self._best_score("body", w)) for w in present]
        whole_cost = sum(t.docs for t in terms)
        generators, generated = [], 0
        for term in sorted(terms, key=lambda t: -t.best):
            generators.append(term)
            generated += term.docs
            if generated >= GENERATOR_MIN_DOCS * top_k:
                break
        found = self._candidates_top(generators, words, top_k, whole_cost)
        if found is None or len(found) < top_k:  # too costly or too few: every title and the rarest body word
            rarest = min((t for t in terms if t.field == "body"), key=lambda t: t.docs)
            generators = [t for t in terms if t.field == "title" or t is rarest]
            found = self._candidates_top(generators, words, top_k, whole_cost)
        if found is None or len(found) < top_k:
            return None  # no k-th score to bound the rest with: the whole query finds the rest
        threshold = found[-1][0] * (1 - BOUND_SLACK)
        bounded = [t for t in terms if t not in generators]
        if sum(t.best for t in bounded) < threshold:
            self.top_paths["driven"] += 1
            return found
        reaching = _reaching_sets(bounded, threshold)
        if sum(min(t.docs for t in group) * len(group) for group in reaching) > SECOND_MAX_COST * whole_cost:
            return None
        Q, Occur = tantivy.Query, tantivy.Occur
        second = Q.boolean_query([(Occur.Should, Q.boolean_query([(Occur.Must, _term(self._schema, t.field, t.word))
                                                                  for t in group])) for group in reaching])
        more = self._searcher.search(self._scored(second, words), top_k, count=False).hits
        self.top_paths["driven+second"] += 1
        merged = {(a.segment_ord, a.doc): (score, a) for score, a in found + more}  # the same doc, the same score
        return sorted(merged.values(), key=lambda h: (-h[0], h[1].segment_ord, h[1].doc))[:top_k]

    def _candidates_top(self, generators: list[_Term], words: list[str], top_k: int,
                        whole_cost: int) -> list[tuple[float, tantivy.DocAddress]] | None:
        """The top-k of the generating terms' documents scored with the whole query; None if scoring them
        would cost more than the whole query (``DRIVEN_MAX_COST``)."""
        lookups = 2 * len(words)  # a title and a body list per word
        if sum(t.docs for t in generators) * lookups > DRIVEN_MAX_COST * whole_cost:
            return None
        candidates = tantivy.Query.boolean_query([(tantivy.Occur.Should, _term(self._schema, t.field, t.word))
                                                  for t in generators])
        return self._searcher.search(self._scored(candidates, words), top_k, count=False).hits

    def _scored(self, candidates: tantivy.Query, words: list[str]) -> tantivy.Query:
        """``candidates``' documents scored with the whole query: Must(candidates, scoring 0) and one Should
        term per level, so each term's list is sought to each candidate (a flat Should list would be a union
        that decodes the lists whole). The terms are added in the parser's order, so the sums are the same."""
        Q, Occur = tantivy.Query, tantivy.Occur
        query = Q.const_score_query(candidates, 0.0)
        for w in words:
            query = Q.boolean_query([(Occur.Must, query),
                                     (Occur.Should, Q.boost_query(_term(self._schema, "title", w), TITLE_BOOST))])
            query = Q.boolean_query([(Occur.Must, query), (Occur.Should, _term(self._schema, "body", w))])
        return query

    def _best_score(self, field_name: str, word: str) -> float:
        """The best score ``word`` gives any document in ``field_name`` (titles boosted, as the whole query scores
        them): recorded at build for frequent words, else found once (a top-1 search) and kept."""
        key = (field_name, word)
        score = self._recorded_best.get(key, self._found_best.get(key))
        if score is None:
            score = _best_score(self._searcher, self._schema, field_name, word)
            if len(self._found_best) >= MAX_SCORE_CACHE:
                self._found_best.clear()
            self._found_best[key] = score
        return score

    def fetch(self, found: list[tuple[float, tantivy.DocAddress]]) -> list[tuple[float, StoredDocument]]:
        """The stored documents of ``top``'s hits, with their scores."""
        return [(score, self._stored(self._searcher.doc(address))) for score, address in found]

    def _stored(self, doc: tantivy.Document) -> StoredDocument:
        if self._codec is None:
            body = doc.get_first("body") or ""
        else:
            frame = doc.get_first("body_z")
            body = self._codec.decompress(bytes(frame)) if frame else ""
        html = doc.get_first("html")
        head = doc.get_first("contents_head")
        return StoredDocument(url=doc.get_first("url"), title=doc.get_first("title") or "", body=body,
                              html=bytes(html) if html else None,
                              contents_head=bytes(head).decode() if head is not None else None)

    def hits(self, parsed: tantivy.Query | None, docs: list[tuple[float, StoredDocument]]) -> list[SearchHit]:
        """Search hits with a query-aware snippet of each document's body."""
        if parsed is None or not docs:
            return []
        snippets = tantivy.SnippetGenerator.create(self._searcher, parsed, self._schema, "body")
        snippets.set_max_num_chars(self.snippet_chars)
        hits = []
        for _score, doc in docs:
            snippet = snippets.snippet_from_doc(tantivy.Document(body=doc.body)).fragment() or doc.body[: self.snippet_chars]
            hits.append(SearchHit(title=doc.title, url=doc.url, snippet=" ".join(snippet.split())))
        return hits

    def search(self, query: str, top_k: int = 10) -> list[SearchHit]:
        """The ``top_k`` best hits for ``query``, each with a query-aware snippet (the web_search tool)."""
        parsed, found = self.top(query, top_k)
        return self.hits(parsed, self.fetch(found))

    def passages(self, query: str, top_k: int = 10) -> list[Passage]:
        """The same ranking as :meth:`search`, each document whole with its BM25 score (the retriever API)."""
        passages = []
        for score, doc in self.fetch(self.top(query, top_k)[1]):
            passages.append(Passage(id=doc.url, url=doc.url, title=doc.title, text=doc.body, score=score,
                                    contents_head=doc.contents_head))
        return passages

    def get_page(self, url: str) -> Page | None:
        """The stored page for ``url`` (tolerating a trailing slash or #fragment), or None."""
        for candidate in dict.fromkeys((url, url.split("#")[0], url.rstrip("/"), url.split("#")[0].rstrip("/"))):
            query = tantivy.Query.term_query(self._schema, "url", candidate)
            result = self._searcher.search(query, 1)
            if result.hits:
                doc = self._stored(self._searcher.doc(result.hits[0][1]))
                html = doc.html.decode("utf-8", errors="replace") if doc.html else None
                return Page(url=candidate, title=doc.title, html=html, text=None if html else doc.body)
        return None


class LocalSearchBackend:
    """The ``local`` search backend: a LocalIndex behind the async SearchBackend protocol."""

    name = "local"

    def __init__(self, index: LocalIndex | str | Path, snippet_chars: int = 240) -> None:
        self.index = index if isinstance(index, LocalIndex) else LocalIndex(index, snippet_chars)

    async def search(self, query: str, top_k: int) -> list[SearchHit]:
        # tantivy answers in well under a millisecond; a thread hop would cost more than the search.
        return self.index.search(query, top_k)

    async def aclose(self) -> None:
        return None
