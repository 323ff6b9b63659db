"""HTML -> text extractors compared: main-content quality and milliseconds per page.

Quality is bag-of-words precision, recall and F1 of the extracted text against the page's known main
text (the metric of the article-extraction benchmarks):

* world pages: the main text is the page's ``<article>`` (everything else is the navigation, cookie
  banner, ads, related links and footer the world wraps it in);
* real web pages, when present: Zyte's article-extraction-benchmark (181 news and blog pages from 2019:
  ``html/<id>.html.gz`` and ``ground-truth.json`` with each ``articleBody``), from
  ``git clone https://github.com/scrapinghub/article-extraction-benchmark``, found at ``--real DIR`` or
  ``$DEEPRESEARCHER_DATA_DIR/article-extraction-benchmark``. It is not in the repository.

    deepresearcher bench extract --json
    deepresearcher bench extract --json --real ~/data/article-extraction-benchmark
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
from lxml import html as lxml_html

from deepresearcher.web.html import html_to_text
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


def main(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="deepresearcher bench extract")
    parser.add_argument("--world-size", default="small", choices=["tiny", "small", "medium"])
    parser.add_argument("--pages", type=int, default=600, help="World pages compared.")
    parser.add_argument("--real", type=Path, default=None, help="A checkout of scrapinghub/article-extraction-benchmark.")
    args = parser.parse_args(argv)
    real = args.real or Path(os.environ.get("DEEPRESEARCHER_DATA_DIR", "/nonexistent")) / "article-extraction-benchmark"
    result: dict[str, Any] = {"benchmark": "extract", "metric": "bag-of-words precision/recall/F1 against the known main text",
                              "world": compare(world_pages(args.world_size, args.pages))}
    if (real / "ground-truth.json").is_file():
        result["real_pages"] = compare(real_pages(real))
    else:
        result["real_pages"] = f"not measured: no article-extraction-benchmark checkout at {real} (see --real)"
    return result


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(main(sys.argv[1:]), indent=2))
