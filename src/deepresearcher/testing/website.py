"""A real website on loopback: serves HTML pages (the synthetic world's, or any) plus awkward cases.

The live fetcher, the handler service and ``bench env`` browse it over real HTTP, so their tests
exercise sockets, redirects, content types and timeouts without the internet.

Routes:

* ``/<path>`` — a page registered under that path (a world page ``https://host/p`` lives at ``/host/p``,
  so pages of different sites never collide);
* ``/_t/text`` plain text, ``/_t/pdf`` a one-page PDF, ``/_t/image`` a PNG (unsupported content);
* ``/_t/latin1`` HTML in ISO-8859-1 declared only by ``<meta charset>``; ``/_t/octet-pdf`` a PDF sent as
  ``application/octet-stream`` (recognized from its bytes);
* ``/_t/redirect/<n>`` a chain of ``n`` redirects ending at ``/_t/text``;
* ``/_t/redirect-to?url=...`` one redirect to any URL (e.g. ``file:///etc/passwd``);
* ``/_t/slow?s=2`` answers after ``s`` seconds (counting :attr:`max_in_flight`); ``/_t/huge?mb=8``
  streams that many MB of HTML;
* ``/_t/status/<code>`` answers that status.

Example::

    with LoopbackWebsite({"/wiki/Dune": ("Dune", "<html>...</html>")}).running() as site:
        site.url("/wiki/Dune")   # http://127.0.0.1:PORT/wiki/Dune
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import orjson
from aiohttp import web

from deepresearcher.testing._serve import serve_in_thread

TEXT_BODY = "Plain text page. The Larch Institute was founded in 1911 by Ada Brennan."
PDF_TEXT = "The Quillon Treaty was signed in 1784 at Varnholt."
PDF_TITLE = "Quillon Treaty Report"
LATIN1_TITLE = "Café Señor"
LATIN1_TEXT = "Le café de Señor Müller ouvrit en 1902 à Zürich."


def make_pdf(text: str, title: str = "") -> bytes:
    """A minimal valid one-page PDF showing ``text`` in Helvetica (no PDF library needed)."""
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    content = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
         b"/Resources << /Font << /F1 5 0 R >> >> >>"),
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Title (" + title.encode("latin-1") + b") >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 6 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6300010000050001"
    "0d0a2db40000000049454e44ae426082"
)


class LoopbackWebsite:
    """An aiohttp website serving registered pages by path, plus the test routes above."""

    def __init__(self, pages: dict[str, tuple[str, str]] | None = None) -> None:
        self.pages: dict[str, tuple[str, str]] = {}
        for path, (title, html) in (pages or {}).items():
            self.add(path, title, html)
        self.base_url = ""
        self.hits = 0
        self.in_flight = 0
        self.max_in_flight = 0  # most /_t/slow requests served at once

    @classmethod
    def from_pages_jsonl(cls, path: str | Path) -> LoopbackWebsite:
        """Serve the world's ``pages.jsonl`` (lines of ``{url, title, html}``); see :meth:`local_url`."""
        site = cls()
        with open(path, "rb") as lines:
            for line in lines:
                if line.strip():
                    rec = orjson.loads(line)
                    site.add(site.local_path(rec["url"]), rec.get("title", ""), rec["html"])
        return site

    def add(self, path: str, title: str, html: str) -> None:
        """Register a page at ``path`` (which must start with ``/``)."""
        self.pages[path if path.startswith("/") else "/" + path] = (title, html)

    def url(self, path: str) -> str:
        """The loopback URL of ``path`` once the site runs."""
        return self.base_url + (path if path.startswith("/") else "/" + path)

    @staticmethod
    def local_path(world_url: str) -> str:
        """Where a world URL is served here: ``https://site.example/wiki/X`` → ``/site.example/wiki/X``."""
        parts = urlsplit(world_url)
        return f"/{parts.netloc}{parts.path or '/'}"

    def local_url(self, world_url: str) -> str:
        """The loopback URL of this site's copy of a world URL."""
        return self.url(self.local_path(world_url))

    # ------------------------------------------------------------------ the app

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/_t/text", self._text)
        app.router.add_get("/_t/pdf", self._pdf)
        app.router.add_get("/_t/image", self._image)
        app.router.add_get("/_t/latin1", self._latin1)
        app.router.add_get("/_t/octet-pdf", self._octet_pdf)
        app.router.add_get("/_t/redirect/{n}", self._redirect_chain)
        app.router.add_get("/_t/redirect-to", self._redirect_to)
        app.router.add_get("/_t/slow", self._slow)
        app.router.add_get("/_t/huge", self._huge)
        app.router.add_get("/_t/status/{code}", self._status)
        app.router.add_get("/{path:.*}", self._page)
        return app

    async def _page(self, request: web.Request) -> web.Response:
        self.hits += 1
        found = self.pages.get(request.path)
        if found is None:
            raise web.HTTPNotFound(text=f"no page at {request.path}")
        return web.Response(text=found[1], content_type="text/html", charset="utf-8")

    async def _text(self, request: web.Request) -> web.Response:
        return web.Response(text=TEXT_BODY, content_type="text/plain")

    async def _pdf(self, request: web.Request) -> web.Response:
        return web.Response(body=make_pdf(PDF_TEXT, PDF_TITLE), content_type="application/pdf")

    async def _image(self, request: web.Request) -> web.Response:
        return web.Response(body=_PNG, content_type="image/png")

    async def _latin1(self, request: web.Request) -> web.Response:
        html = f'<html><head><meta charset="iso-8859-1"><title>{LATIN1_TITLE}</title></head><body>{LATIN1_TEXT}</body></html>'
        return web.Response(body=html.encode("latin-1"), headers={"Content-Type": "text/html"})

    async def _octet_pdf(self, request: web.Request) -> web.Response:
        return web.Response(body=make_pdf(PDF_TEXT, PDF_TITLE), content_type="application/octet-stream")

    async def _redirect_chain(self, request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        raise web.HTTPFound("/_t/text" if n <= 1 else f"/_t/redirect/{n - 1}")

    async def _redirect_to(self, request: web.Request) -> web.Response:
        raise web.HTTPFound(request.query["url"])

    async def _slow(self, request: web.Request) -> web.Response:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(float(request.query.get("s", "2")))
        finally:
            self.in_flight -= 1
        return web.Response(text="<html><title>Slow</title><body>finally</body></html>", content_type="text/html")

    async def _huge(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html; charset=utf-8"})
        await resp.prepare(request)
        block = b"<p>" + b"filler text " * 5000 + b"</p>\n"
        sent, limit = 0, int(float(request.query.get("mb", "8")) * 1_000_000)
        await resp.write(b"<html><head><title>Huge</title></head><body>")
        try:
            while sent < limit:
                await resp.write(block)
                sent += len(block)
        except (ConnectionResetError, RuntimeError):
            return resp  # the client hung up after its size cap, as it should
        await resp.write_eof()
        return resp

    async def _status(self, request: web.Request) -> web.Response:
        return web.Response(status=int(request.match_info["code"]), text="status page")

    # ------------------------------------------------------------------ running it

    @contextmanager
    def running(self, host: str = "127.0.0.1", port: int = 0) -> Iterator[LoopbackWebsite]:
        """Serve in a background thread with its own event loop; sets :attr:`base_url`."""
        with serve_in_thread(self.app(), "loopback-website", host, port) as url:
            self.base_url = url
            yield self


def handmade_pages() -> dict[str, tuple[str, str]]:
    """A few hand-written pages for tests that do not need a whole world."""
    pages = {
        "/wiki/Ada_Brennan": (
            "Ada Brennan",
            (
                "<html><head><title>Ada Brennan</title></head><body><nav>Home | About</nav><article>"
                "<h1>Ada Brennan</h1><p>Ada Brennan was a botanist born in 1874 in Corvale. She founded the "
                "Larch Institute in 1911 and directed it until 1932.</p><p>Her study of alpine larches made her "
                "the first woman elected to the Corvale Academy of Sciences.</p></article></body></html>"
            ),
        ),
        "/wiki/Corvale": (
            "Corvale",
            (
                "<html><head><title>Corvale</title></head><body><article><h1>Corvale</h1><p>Corvale is a "
                "mountain town on the river Tesk. Its population was 12,400 in 1900.</p><p>The Larch Institute "
                "stands on its northern slope.</p></article></body></html>"
            ),
        ),
    }
    return pages

