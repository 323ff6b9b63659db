"""HTML -> text extractors compared: main-content quality and milliseconds per page.

Quality is bag-of-words precision, recall and F1 of the extracted text against the page's known main
text (the metric of the article-extraction benchmarks):

* world pages: the main text is the page's ``<article>`` (everything else is the navigation, cookie
  banner, ads, related links and footer the world wraps it in);
* real web pages, when present: Zyte's article-extraction-benchmark (181 news and blog pages from 2019:
  ``html/<id>.html.gz`` and ``ground-truth.json`` with each ``articleBody``), from
  ``git clone https://github.com/scrapinghub/article-extraction-benchmark``, found at ``--real DIR`` or
  ``$DEEPRESEARCHER_DATA_DIR/article-extraction-benchmark``. It is not in the repository.

and, on real pages whose main text is known only by sentences, with trafilatura's own metric:

* trafilatura's evaluation set, when present: real pages (blogs, news, shops, institutions, 2006-2020,
  mostly German, some English, French and Chinese) from github.com/adbar/trafilatura ``tests/cache/*.html``
  (trafilatura 0.8.2's sdist on PyPI ships the same files: ``pip download trafilatura==0.8.2
  --no-binary :all: --no-deps``), with ``tests/evaldata.py``'s sentences per page that must be in the main text
  (``with``) and must not (``without``: menus, footers, related links, comments). Found at
  ``--real-snippets DIR``, ``$DEEPRESEARCHER_DATA_DIR/trafilatura-eval`` or
  ``~/.cache/deepresearcher/trafilatura-eval``: one ``<file>.html`` per page and ``expectations.json``
  (``{file: {"url", "with": [...], "without": [...]}}``, converted from ``evaldata.py``'s
  ``EVAL_PAGES``). It is not in the repository. A ``with`` sentence found in the extracted text
  (whitespace normalized on both sides) is a true positive, missing a false negative; a ``without``
  sentence found is a false positive, absent a true negative; the counts of all pages add up to
  precision, recall, F1 and accuracy, as in trafilatura's ``tests/comparison.py``. Trafilatura's rules
  were tuned on these very pages: the set favours it.

    deepresearcher bench extract --json
    deepresearcher bench extract --json --real ~/data/article-extraction-benchmark
    deepresearcher bench extract --json --real-snippets ~/.cache/deepresearcher/trafilatura-eval
"""

from __future__ import annotations

import argparse
import gzip
import re
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import platformdirs
from lxml import html as lxml_html

from deepresearcher.data.registry import local_data_dir
from deepresearcher.web.html import decode_bytes, html_to_text
from deepresearcher.world import build_world, iter_pages

EXTRACTORS = ("resiliparse", "trafilatura")
_WORD = re.compile(r"\w+", re.UNICODE)


def _bag(text: str) -> Counter[str]:
    return Counter(_WORD.findall(text.lower()))


def score(extracted: str, gold: str) -> tuple[float, float]:
    """Bag-of-words (precision, recall) of ``extracted`` against ``gold``."""
    got, want = _bag(extracted), _bag(gold)
    overlap = sum((got & want).values())
    return overlap / max(1, sum(got.values())), overlap / max(1, sum(want.values()))


def world_pages(size: str, limit: int) -> list[tuple[str, str]]:
    """(html, main text) of the first ``limit`` pages of a seed-7 world."""
    with tempfile.TemporaryDirectory() as tmp:
        build_world(7, size, Path(tmp))
        pages = []
        for page in iter_pages(tmp):
            article = lxml_html.fromstring(page["html"]).xpath("//article")[0]
            pages.append((page["html"], " ".join(article.itertext())))
            if len(pages) >= limit:
                break
    return pages


def real_pages(folder: Path) -> list[tuple[str, str]]:
    """(html, articleBody) of the article-extraction-benchmark in ``folder``."""
    truth = orjson.loads((folder / "ground-truth.json").read_bytes())
    pages = []
    for key, item in sorted(truth.items()):
        path = folder / "html" / f"{key}.html.gz"
        if path.is_file():
            pages.append((gzip.decompress(path.read_bytes()).decode("utf-8", errors="replace"), item["articleBody"]))
    return pages


def compare(pages: list[tuple[str, str]]) -> dict[str, Any]:
    rows = {}
    for extractor in EXTRACTORS:
        precision, recall, seconds = [], [], []
        for html, gold in pages:
            started = time.perf_counter()
            text = html_to_text(html, extractor=extractor)
            seconds.append(time.perf_counter() - started)
            p, r = score(text, gold)
            precision.append(p)
            recall.append(r)
        p, r = statistics.mean(precision), statistics.mean(recall)
        rows[extractor] = {"precision": round(p, 4), "recall": round(r, 4), "f1": round(2 * p * r / (p + r or 1), 4),
                           "ms_per_page_median": round(statistics.median(seconds) * 1000, 3),
                           "ms_per_page_mean": round(statistics.mean(seconds) * 1000, 3)}
    return {"pages": len(pages), "extractors": rows}


def snippet_pages(folder: Path) -> list[tuple[str, list[str], list[str]]]:
    """(html, with, without) of each page of trafilatura's evaluation set in ``folder``."""
    expectations = orjson.loads((folder / "expectations.json").read_bytes())
    pages = []
    for name, item in sorted(expectations.items()):
        path = folder / name
        if path.is_file():
            pages.append((decode_bytes(path.read_bytes()), list(item["with"]), list(item["without"])))
    return pages


def _squeeze(text: str) -> str:
    return " ".join(text.split())


def snippet_counts(extracted: str, with_: list[str], without: list[str]) -> tuple[int, int, int, int]:
    """(true positives, false negatives, false positives, true negatives) of one page's sentences."""
    text = _squeeze(extracted)
    found = sum(_squeeze(sentence) in text for sentence in with_)
    leaked = sum(_squeeze(sentence) in text for sentence in without)
    return found, len(with_) - found, leaked, len(without) - leaked


def snippet_scores(tp: int, fn: int, fp: int, tn: int) -> dict[str, float]:
    """Precision, recall, F1 and accuracy of summed sentence counts (trafilatura's comparison.py)."""
    precision, recall = tp / max(1, tp + fp), tp / max(1, tp + fn)
    return {"precision": round(precision, 4), "recall": round(recall, 4),
            "f1": round(2 * tp / max(1, 2 * tp + fp + fn), 4),
            "accuracy": round((tp + tn) / max(1, tp + fn + fp + tn), 4)}


def compare_snippets(pages: list[tuple[str, list[str], list[str]]]) -> dict[str, Any]:
    rows = {}
    for extractor in EXTRACTORS:
        counts, seconds = [0, 0, 0, 0], []
        for html, with_, without in pages:
            started = time.perf_counter()
            text = html_to_text(html, extractor=extractor)
            seconds.append(time.perf_counter() - started)
            counts = [a + b for a, b in zip(counts, snippet_counts(text, with_, without))]
        tp, fn, fp, tn = counts
        rows[extractor] = {**snippet_scores(tp, fn, fp, tn), "true_positives": tp, "false_negatives": fn,
                           "false_positives": fp, "true_negatives": tn,
                           "ms_per_page_median": round(statistics.median(seconds) * 1000, 3) if seconds else None,
                           "ms_per_page_mean": round(statistics.mean(seconds) * 1000, 3) if seconds else None}
    return {"pages": len(pages), "sentences_with": sum(len(w) for _, w, _ in pages),
            "sentences_without": sum(len(w) for _, _, w in pages), "extractors": rows}


def snippets_folder(given: Path | None) -> Path:
    """``--real-snippets``, else ``trafilatura-eval`` in the local data dir when it is there, else the user cache's."""
    if given is not None:
        return given
    data_dir = local_data_dir()
    if data_dir and (data_dir / "trafilatura-eval" / "expectations.json").is_file():
        return data_dir / "trafilatura-eval"
    return Path(platformdirs.user_cache_dir("deepresearcher")) / "trafilatura-eval"


def main(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="deepresearcher bench extract")
    parser.add_argument("--world-size", default="small", choices=["tiny", "small", "medium"])
    parser.add_argument("--pages", type=int, default=600, help="World pages compared.")
    parser.add_argument("--real", type=Path, default=None, help="A checkout of scrapinghub/article-extraction-benchmark.")
    parser.add_argument("--real-snippets", type=Path, default=None,
                        help="trafilatura's evaluation set: <file>.html pages and expectations.json.")
    args = parser.parse_args(argv)
    data = local_data_dir()
    real = args.real or (data / "article-extraction-benchmark" if data else Path("not-found"))
    result: dict[str, Any] = {"benchmark": "extract", "metric": "bag-of-words precision/recall/F1 against the known main text",
                              "world": compare(world_pages(args.world_size, args.pages))}
    if (real / "ground-truth.json").is_file():
        result["real_pages"] = compare(real_pages(real))
    else:
        result["real_pages"] = f"not measured: no article-extraction-benchmark checkout at {real} (see --real)"
    snippets = snippets_folder(args.real_snippets)
    if (snippets / "expectations.json").is_file():
        result["real_pages_snippets"] = {
            "metric": "sentences that must be in / out of the main text (trafilatura's tests/evaldata.py), counts summed "
                      "over pages", "set": str(snippets), **compare_snippets(snippet_pages(snippets))}
    else:
        result["real_pages_snippets"] = (f"not measured: no trafilatura evaluation set at {snippets} "
                                         "(see --real-snippets)")
    return result


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(main(sys.argv[1:]), indent=2))
