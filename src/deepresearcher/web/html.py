"""HTML → clean text: the main content, without navigation, banners, ads and footers.

Two extractors (``browse.extractor``), chosen by measured quality first, then speed (``bench extract``,
``bench env``, ``bench reader``; figures in docs/fetch.md). Pages fetched live use ``browse.extractor``;
world pages and HTML corpora are extracted once, when their index is built, by ``BULK_EXTRACTOR``.

* ``trafilatura`` (default for fetched pages): lxml and many rules, its fallback extractors (readability,
  jusText) off. On real web pages it keeps the main text and drops far more boilerplate than resiliparse (sentence
  F1 0.918 against 0.817 on trafilatura's own test pages); the fallbacks added +0.01 there at 2-3x the
  CPU of a cold browse. About 1 ms a world page, 7 ms a real one.
* ``resiliparse``: ChatNoir's Lexbor-based extractor, about 0.2 ms a world page, with simple
  main-content heuristics (bylines, teasers and share labels leak through; on some layouts it keeps
  nothing of the article); bullet lists inside ``<article>``/``<main>``, which those heuristics would
  drop, are kept. Used for pages extracted in bulk (``BULK_EXTRACTOR``) and for throughput.

Input is never trusted: bytes of any encoding, huge pages and empty pages all come back as text
(possibly empty), never as an exception.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Literal

import trafilatura
from lxml import html as lxml_html

logger = logging.getLogger(__name__)

Extractor = Literal["trafilatura", "resiliparse"]
LIVE_EXTRACTOR: Extractor = "trafilatura"
"""``browse.extractor``'s default: pages fetched from the web, where main-text quality decides."""
BULK_EXTRACTOR: Extractor = "resiliparse"
"""Pages extracted by the thousand (world pages, HTML corpora being indexed): on the world's pages both
keep the article (F1 1.000 and 0.991) and resiliparse is 5-10x faster."""
_BLANKS = re.compile(r"\n{3,}")


def decode_bytes(data: bytes, declared: str | None = None) -> str:
    """Decode page bytes: the declared charset, else UTF-8, else cp1252; never raises."""
    for encoding in (declared, "utf-8"):
        if encoding:
            try:
                return data.decode(encoding)
            except (LookupError, UnicodeDecodeError):
                continue
    return data.decode("cp1252", errors="replace")


def html_to_text(html: str | bytes, max_chars: int | None = None, extractor: Extractor = BULK_EXTRACTOR) -> str:
    """The readable main text of a page, tables kept, boilerplate removed, by ``extractor``.

    Falls back to all visible text when the extractor finds no main content (tiny or odd pages).
    """
    if isinstance(html, bytes):
        html = decode_bytes(html)
    if not html.strip():
        return ""
    text = _EXTRACTORS[extractor](html)
    if not text:
        text = _visible_text(html)
    text = _BLANKS.sub("\n\n", text).strip()
    return text[:max_chars] if max_chars else text


def _trafilatura(html: str) -> str:
    return trafilatura.extract(html, include_tables=True, include_comments=False, include_links=False,
                               favor_recall=True, deduplicate=False, fast=True) or ""


def _resiliparse(html: str) -> str:
    from resiliparse.extract.html2text import extract_plain_text  # imported on first use: only its users pay
    from resiliparse.parse.html import HTMLTree

    tree = HTMLTree.parse(html)
    if tree.body is not None:
        # Its main-content heuristics drop every <ul> (menus usually are one) but keep <ol>: bullet lists
        # inside the page's own <article>/<main> are facts, so they go in as ordered lists.
        for bullets in tree.body.query_selector_all("article ul, main ul"):
            numbered = tree.create_element("ol")
            for child in list(bullets.child_nodes):
                numbered.append_child(child)
            bullets.parent.replace_child(numbered, bullets)
    text = extract_plain_text(tree, main_content=True, alt_texts=False, links=False, list_bullets=False,
                              comments=False)
    # One line per block, as trafilatura writes (notes and compact observations keep blank lines as separators).
    lines = (_table_row(line) if "\t" in line else line.strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def _table_row(line: str) -> str:
    """A tab-separated table row as ``| cell | cell |``, as trafilatura writes tables (readers and the oracle rely on it)."""
    return "| " + " | ".join(cell.strip() for cell in line.split("\t") if cell.strip()) + " |"


_EXTRACTORS: dict[str, Callable[[str], str]] = {"trafilatura": _trafilatura, "resiliparse": _resiliparse}


def _visible_text(html: str) -> str:
    try:
        tree = lxml_html.fromstring(html)
    except (ValueError, lxml_html.etree.ParserError):
        return ""
    for bad in tree.xpath("//script|//style|//noscript"):
        bad.drop_tree()
    return "\n".join(line.strip() for line in tree.text_content().splitlines() if line.strip())


def html_title(html: str) -> str:
    """The page's <title>, or an empty string."""
    match = re.search(r"<title[^>]*>(.*?)</title>", html, flags=re.IGNORECASE | re.DOTALL)
    return re.sub(r"\s+", " ", match.group(1)).strip() if match else ""
