"""HTML → clean text. trafilatura keeps the main content and drops navigation, banners, ads and footers.

Input is never trusted: bytes of any encoding, huge pages and empty pages all come back as text
(possibly empty), never as an exception.
"""

from __future__ import annotations

import logging
import re

import trafilatura
from lxml import html as lxml_html

logger = logging.getLogger(__name__)

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


def html_to_text(html: str | bytes, max_chars: int | None = None) -> str:
    """The readable main text of a page, tables kept, boilerplate removed.

    Falls back to all visible text when trafilatura finds no main content (tiny or odd pages).
    """
    if isinstance(html, bytes):
        html = decode_bytes(html)
    if not html.strip():
        return ""
    text = trafilatura.extract(html, include_tables=True, include_comments=False, include_links=False,
                               favor_recall=True, deduplicate=False)
    if not text:
        text = _visible_text(html)
    text = _BLANKS.sub("\n\n", text).strip()
    return text[:max_chars] if max_chars else text


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
