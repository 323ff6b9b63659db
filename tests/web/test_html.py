"""HTML -> text with both extractors: main content kept (tables, bullet lists), boilerplate dropped, any input survives."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepresearcher.config import Config, FetchConfig
from deepresearcher.testing.website import LoopbackWebsite
from deepresearcher.web.backends.local_build import build_index
from deepresearcher.web.environment import WebEnvironment
from deepresearcher.web.fetch import PageFetcher
from deepresearcher.web.html import html_to_text

PAGE = """<!DOCTYPE html><html><head><title>Hyport - Wikiverse</title></head><body>
<header><nav><ul><li><a href="/">Home</a></li><li><a href="/topics">Topics</a></li></ul></nav></header>
<div class="cookie-banner" role="dialog">We use cookies to improve your experience. <button>Accept</button></div>
<main><article><h1>Hyport</h1>
<p>Hyport is a port city with a long and eventful history, drawn from archival material and interviews.</p>
<table><tr><th>Nation</th><td>Grirstan</td></tr><tr><th>Inhabitants</th><td>2,987,800</td></tr></table>
<p>People born in Hyport:</p><ul><li>Samer Gaepyquo (born 1966)</li><li>Sheitror Heshymaend (born 1958)</li></ul>
</article></main>
<aside class="related"><h2>Related pages</h2><ul><li><a href="/wiki/Grirstan">Grirstan</a></li></ul></aside>
<footer><p>&copy; 2025 Wikiverse. All rights reserved.</p></footer></body></html>"""


@pytest.mark.parametrize("extractor", ["resiliparse", "trafilatura"])
def test_main_content_is_kept_and_boilerplate_dropped(extractor: str) -> None:
    text = html_to_text(PAGE, extractor=extractor)
    assert "long and eventful history" in text
    assert "| Inhabitants | 2,987,800 |" in text, "table rows are written as | cell | cell |"
    assert "Samer Gaepyquo (born 1966)" in text and "Sheitror Heshymaend (born 1958)" in text
    for boilerplate in ("cookies", "Related pages", "All rights reserved", "Topics"):
        assert boilerplate not in text


@pytest.mark.parametrize("extractor", ["resiliparse", "trafilatura"])
def test_any_input_comes_back_as_text(extractor: str) -> None:
    assert html_to_text(b"", extractor=extractor) == ""
    assert html_to_text("   \n ", extractor=extractor) == ""
    assert "Caf\xe9 cr\xe8me" in html_to_text("<p>Caf\xe9 cr\xe8me is served here.</p>".encode("cp1252"), extractor=extractor)
    assert html_to_text("<html><body><div>tiny</div></body></html>", extractor=extractor) == "tiny"
    assert html_to_text("<p>" + "word " * 50_000 + "</p>", max_chars=100, extractor=extractor).startswith("word word")
    assert len(html_to_text("<p>" + "word " * 50_000 + "</p>", max_chars=100, extractor=extractor)) <= 100
    assert isinstance(html_to_text("<<<>>><html><body><p>broken <b>markup", extractor=extractor), str)


@pytest.mark.parametrize("extractor", ["resiliparse", "trafilatura"])
async def test_browse_extractor_setting_decides_the_page_text(tmp_path: Path, extractor: str) -> None:
    build_index(iter([{"url": "https://wikiverse.org/wiki/Hyport", "title": "Hyport", "html": PAGE}]), tmp_path / "ix")
    config = Config.model_validate({"search": {"index": str(tmp_path / "ix")}, "browse": {"extractor": extractor},
                                    "cache_dir": str(tmp_path / "cache")})
    async with WebEnvironment.from_config(config) as env:
        page = await env.read_page("https://wikiverse.org/wiki/Hyport")
    assert page.text == html_to_text(PAGE, extractor=extractor)
    assert ("|---|" in page.text) == (extractor == "trafilatura")  # trafilatura adds a markdown header rule


@pytest.mark.parametrize("extractor", ["resiliparse", "trafilatura"])
async def test_live_fetch_extracts_with_the_configured_extractor(extractor: str) -> None:
    site = LoopbackWebsite()
    site.add("/wiki/Hyport", "Hyport", PAGE)
    with site.running():
        async with PageFetcher(FetchConfig(allow_private=True), extractor=extractor) as fetcher:
            page = await fetcher.fetch(site.url("/wiki/Hyport"))
    assert page.text == html_to_text(PAGE, extractor=extractor)
