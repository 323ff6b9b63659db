"""The live page fetcher against a real website on loopback: content types, limits and address safety."""

from __future__ import annotations

import asyncio
import time

import pytest

from deepresearcher.config import FetchConfig
from deepresearcher.errors import PageError, UnsafeURLError, UnsupportedContentError
from deepresearcher.testing.website import (
    LATIN1_TEXT,
    LATIN1_TITLE,
    PDF_TEXT,
    PDF_TITLE,
    TEXT_BODY,
    LoopbackWebsite,
    handmade_pages,
)
from deepresearcher.web.fetch import PageFetcher


@pytest.fixture(scope="module")
def site():
    with LoopbackWebsite(handmade_pages()).running() as running:
        yield running


def _fetcher(**overrides) -> PageFetcher:
    return PageFetcher(FetchConfig(allow_private=True, **overrides))


async def test_html_page_becomes_clean_text_with_title(site):
    """HTML is turned into its article text (navigation dropped) and keeps its <title>."""
    async with _fetcher() as fetcher:
        page = await fetcher.fetch(site.url("/wiki/Ada_Brennan"))
    assert page.title == "Ada Brennan"
    assert page.content_type == "text/html"
    assert "founded the Larch Institute in 1911" in page.text
    assert "Home | About" not in page.text
    assert page.html is not None and "<article>" in page.html


async def test_pdf_and_plain_text_are_read(site):
    """PDF bodies are parsed to text with their title; plain text comes back verbatim."""
    async with _fetcher() as fetcher:
        pdf = await fetcher.fetch(site.url("/_t/pdf"))
        text = await fetcher.fetch(site.url("/_t/text"))
    assert pdf.content_type == "application/pdf" and pdf.title == PDF_TITLE
    assert PDF_TEXT in pdf.text
    assert text.text == TEXT_BODY and text.content_type == "text/plain"


async def test_charset_from_meta_and_pdf_recognized_by_its_bytes(site):
    """A page whose charset is only in <meta> decodes right; a PDF sent as octet-stream is still read."""
    async with _fetcher() as fetcher:
        latin = await fetcher.fetch(site.url("/_t/latin1"))
        pdf = await fetcher.fetch(site.url("/_t/octet-pdf"))
    assert latin.title == LATIN1_TITLE and LATIN1_TEXT in latin.text
    assert pdf.content_type == "application/pdf" and PDF_TEXT in pdf.text


async def test_per_host_concurrency_is_bounded(site):
    """Eight slow pages from one host are fetched at most fetch.per_host_concurrency at a time."""
    site.max_in_flight = 0
    async with _fetcher(per_host_concurrency=2) as fetcher:
        started = time.perf_counter()
        pages = await asyncio.gather(*(fetcher.fetch(site.url(f"/_t/slow?s=0.2&n={i}")) for i in range(8)))
        elapsed = time.perf_counter() - started
    assert all(p.title == "Slow" for p in pages)
    assert site.max_in_flight == 2
    assert elapsed >= 0.8 - 0.05


async def test_unsupported_content_and_http_errors_are_clear(site):
    """An image is refused as unsupported content; a 404 names the status."""
    async with _fetcher() as fetcher:
        with pytest.raises(UnsupportedContentError, match="image/png"):
            await fetcher.fetch(site.url("/_t/image"))
        with pytest.raises(PageError, match="HTTP 404"):
            await fetcher.fetch(site.url("/wiki/Nowhere"))


async def test_redirects_are_followed_up_to_the_limit(site):
    """Three hops are followed to the final page; one more than max_redirects fails."""
    async with _fetcher(max_redirects=3) as fetcher:
        page = await fetcher.fetch(site.url("/_t/redirect/3"))
        assert page.text == TEXT_BODY
        with pytest.raises(PageError, match="more than 3 redirects"):
            await fetcher.fetch(site.url("/_t/redirect/4"))


async def test_size_cap_cuts_a_huge_page(site):
    """A page streamed far past max_bytes is cut at the cap instead of read whole."""
    async with _fetcher(max_bytes=200_000) as fetcher:
        page = await fetcher.fetch(site.url("/_t/huge?mb=50"))
    assert page.title == "Huge"
    assert len(page.html.encode()) <= 200_000


async def test_slow_page_times_out(site):
    """A server that does not answer within the read timeout fails fast with a clear error."""
    async with _fetcher(read_timeout_s=0.3, total_timeout_s=5) as fetcher:
        with pytest.raises(PageError, match="read_timeout_s=0.3"):
            await fetcher.fetch(site.url("/_t/slow?s=3"))
    async with _fetcher(read_timeout_s=5, total_timeout_s=0.3) as fetcher:
        with pytest.raises(PageError, match="total_timeout_s=0.3"):
            await fetcher.fetch(site.url("/_t/slow?s=3"))


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://example.org/file",
        "http://127.0.0.1:9/",
        "http://[::1]:9/",
        "http://10.1.2.3/",
        "http://192.168.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:127.0.0.1]/",
        "http://localhost:9/",
    ],
)
async def test_unsafe_urls_are_refused_by_default(url):
    """Non-http schemes and private, loopback or link-local targets (literal or via DNS) are refused."""
    async with PageFetcher(FetchConfig()) as fetcher:
        with pytest.raises(UnsafeURLError):
            await fetcher.fetch(url)


async def test_redirect_target_is_checked_again(site):
    """A permitted host cannot redirect the fetcher to a private address or a file:// URL.

    127.0.0.1 is allowed by name; its redirect to ``localhost`` resolves to loopback and is refused
    after DNS resolution, and a redirect to ``file://`` is refused by scheme.
    """
    port = site.base_url.rsplit(":", 1)[1]
    async with PageFetcher(FetchConfig(allow_hosts=["127.0.0.1"])) as fetcher:
        assert (await fetcher.fetch(site.url("/_t/text"))).text == TEXT_BODY
        with pytest.raises(UnsafeURLError, match="localhost"):
            await fetcher.fetch(site.url(f"/_t/redirect-to?url=http://localhost:{port}/_t/text"))
        with pytest.raises(UnsafeURLError, match="scheme 'file'"):
            await fetcher.fetch(site.url("/_t/redirect-to?url=file:///etc/passwd"))


async def test_pages_become_text_on_one_extraction_thread(site, monkeypatch):
    """Concurrent fetches extract their pages on the fetcher's one extraction thread, off the event loop
    (several threads running trafilatura at once cost several times the CPU per page)."""
    import threading

    import deepresearcher.web.fetch as fetch_module

    threads: set[int] = set()
    extract = fetch_module.html_to_text

    def recording(*args, **kwargs):
        threads.add(threading.get_ident())
        time.sleep(0.01)  # long enough that concurrent fetches overlap
        return extract(*args, **kwargs)

    monkeypatch.setattr(fetch_module, "html_to_text", recording)
    async with _fetcher() as fetcher:
        pages = await asyncio.gather(*(fetcher.fetch(site.url("/wiki/Ada_Brennan")) for _ in range(8)))
    assert all("founded the Larch Institute in 1911" in page.text for page in pages)
    assert len(threads) == 1 and threading.get_ident() not in threads
