"""Fetch live pages over HTTP(S) and turn them into text, without letting a URL reach inside.

The policy chooses the URLs, so every fetch is treated as untrusted input:

* only ``http`` and ``https`` are fetched; ``file://``, ``ftp://``, ``data:`` … are refused;
* an address that is private, loopback, link-local or otherwise not globally routable is refused,
  both when the URL names it literally and when DNS resolves to it (the check runs inside the
  connector's resolver, so it sees exactly the addresses the socket will connect to);
* redirects are followed by hand, at most ``fetch.max_redirects`` hops, and each hop is checked again;
* the body is streamed and cut at ``fetch.max_bytes``, so a huge or endless response costs nothing more.

Content types: HTML → clean text (``web.html.html_to_text``), PDF → text (pypdf), plain text as is;
anything else raises :class:`UnsupportedContentError`, which the environment turns into an observation.

Example::

    async with PageFetcher(config.fetch) as fetcher:
        page = await fetcher.fetch("https://example.org/")
        print(page.title, page.text[:200])
"""

from __future__ import annotations

import asyncio
import functools
import io
import ipaddress
import logging
import re
import socket
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from yarl import URL

from deepresearcher.config import FetchConfig
from deepresearcher.errors import PageError, UnsafeURLError, UnsupportedContentError
from deepresearcher.web.html import LIVE_EXTRACTOR, Extractor, decode_bytes, html_title, html_to_text
from deepresearcher.web.types import Page

T = TypeVar("T")

logger = logging.getLogger(__name__)

_SCHEMES = frozenset({"http", "https"})
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_PDF_TYPES = frozenset({"application/pdf", "application/x-pdf"})
_TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/x-markdown", "text/csv"})
_READABLE_TYPES = _HTML_TYPES | _PDF_TYPES | _TEXT_TYPES
_GENERIC_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream"})  # sniffed from the bytes
_META_CHARSET_RE = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_CHUNK_BYTES = 64 * 1024


class AddressPolicy:
    """Decides which URLs and resolved addresses may be contacted."""

    def __init__(self, allow_private: bool = False, allow_hosts: list[str] | None = None) -> None:
        self.allow_private = allow_private
        self.allow_hosts = frozenset(h.lower().rstrip(".") for h in allow_hosts or [])

    def check_url(self, url: str) -> URL:
        """Parse ``url`` and refuse a bad scheme, a missing host, or a non-public IP literal."""
        try:
            parsed = URL(url)
        except (ValueError, TypeError) as exc:
            raise UnsafeURLError(f"{url!r} is not a valid URL: {exc}") from None
        if parsed.scheme.lower() not in _SCHEMES:
            raise UnsafeURLError(
                f"{url!r}: scheme {parsed.scheme or '(none)'!r} is not fetched; only http:// and https:// URLs are."
            )
        host = parsed.raw_host
        if not host:
            raise UnsafeURLError(f"{url!r} has no host name.")
        try:
            literal = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            _check_host_name(url, host)
            return parsed  # a name: its addresses are checked after DNS resolution, by the resolver
        self.check_address(host, literal)
        return parsed

    def check_address(self, host: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
        """Refuse ``address`` (which ``host`` resolved to) unless it is public or explicitly allowed."""
        if self.allow_private or host.lower().rstrip(".").strip("[]") in self.allow_hosts:
            return
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if not address.is_global or address.is_multicast:
            raise UnsafeURLError(
                f"host {host!r} is at {address}, a private, loopback or link-local address; refused. "
                "Set fetch.allow_private=true (or list the host in fetch.allow_hosts) to allow it."
            )


def _check_host_name(url: str, host: str) -> None:
    """Refuse a host name the resolver cannot encode (an empty label, one over 63 characters).

    The resolver hands the name to ``socket.getaddrinfo``, whose IDNA codec raises ``UnicodeError``
    for such names; caught here it becomes this URL's error instead of failing the whole batch.
    """
    try:
        host.encode("idna")
    except UnicodeError:
        shown = host if len(host) <= 80 else f"{host[:60]}... ({len(host)} characters)"
        raise UnsafeURLError(
            f"{url[:100]!r}: host name {shown!r} is invalid (empty label, or a label over 63 characters)."
        ) from None


class _GuardedResolver(AbstractResolver):
    """Resolves names with aiohttp's default resolver, then refuses non-public answers.

    Checking here rather than before the request closes the gap where a name resolves to a public
    address at check time and to a private one at connect time (DNS rebinding).
    """

    def __init__(self, policy: AddressPolicy) -> None:
        self._policy = policy
        self._inner = DefaultResolver()

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        for result in results:
            self._policy.check_address(host, ipaddress.ip_address(result["host"]))
        return results

    async def close(self) -> None:
        await self._inner.close()


class PageFetcher:
    """An async fetcher for live web pages; one per process, shared by all rollouts.

    Open it once (``async with`` or :meth:`aclose` when done); it keeps one connection pool with a
    per-host limit, so many concurrent browses are polite to each site.
    """

    def __init__(self, config: FetchConfig | None = None, extractor: Extractor = LIVE_EXTRACTOR) -> None:
        self.config = config or FetchConfig()
        self.extractor = extractor  # how an HTML page's text is extracted (browse.extractor)
        self.policy = AddressPolicy(self.config.allow_private, self.config.allow_hosts)
        self._session: aiohttp.ClientSession | None = None
        # Pages become text on one thread of their own: extraction holds the GIL most of the time, so more
        # threads add no speed, and trafilatura on several threads at once costs 3-4x the CPU per page
        # (bench env, cold browse: 21 ms against 5.8 ms of CPU a page with six threads against one).
        self._extraction = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dr-extract")

    async def __aenter__(self) -> PageFetcher:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _get_session(self) -> aiohttp.ClientSession:
        # Created lazily: an aiohttp session must be made inside the running event loop.
        if self._session is None or self._session.closed:
            cfg = self.config
            connector = aiohttp.TCPConnector(
                limit=cfg.max_concurrency,
                limit_per_host=cfg.per_host_concurrency,
                resolver=_GuardedResolver(self.policy),
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(sock_connect=cfg.connect_timeout_s, sock_read=cfg.read_timeout_s),
                headers={"User-Agent": cfg.user_agent, "Accept": "text/html,application/pdf,text/plain;q=0.9,*/*;q=0.1"},
                auto_decompress=True,
            )
        return self._session

    async def fetch(self, url: str) -> Page:
        """Fetch ``url`` and return its text; raise a :class:`PageError` subclass saying what went wrong."""
        try:
            return await asyncio.wait_for(self._fetch(url), timeout=self.config.total_timeout_s)
        except aiohttp.ServerTimeoutError as exc:  # connect or read timeout (also an asyncio.TimeoutError)
            cfg = self.config
            raise PageError(
                f"{url}: timed out ({exc}); limits are fetch.connect_timeout_s={cfg.connect_timeout_s:g}, "
                f"fetch.read_timeout_s={cfg.read_timeout_s:g}."
            ) from None
        except asyncio.TimeoutError:
            raise PageError(
                f"{url}: timed out, no complete answer within fetch.total_timeout_s={self.config.total_timeout_s:g} s."
            ) from None
        except aiohttp.ClientConnectorDNSError:
            raise PageError(f"{url}: the host name does not resolve.") from None
        except aiohttp.ClientError as exc:
            raise PageError(f"{url}: fetch failed ({type(exc).__name__}: {exc}).") from None

    async def _fetch(self, url: str) -> Page:
        session = self._get_session()
        current = url
        for _ in range(self.config.max_redirects + 1):
            target = self.policy.check_url(current)
            async with session.get(target, allow_redirects=False) as resp:
                if resp.status in _REDIRECT_STATUSES:
                    location = resp.headers.get("Location")
                    if not location:
                        raise PageError(f"{url}: redirect ({resp.status}) without a Location header.")
                    try:
                        current = str(resp.url.join(URL(location)))
                    except ValueError:
                        raise UnsafeURLError(f"{url}: redirect to an invalid URL {location!r}.") from None
                    logger.debug("redirect %s -> %s", resp.url, current)
                    continue
                if resp.status >= 400:
                    raise PageError(f"{url}: the server answered HTTP {resp.status} {resp.reason or ''}".rstrip() + ".")
                declared = resp.content_type.lower()
                if declared not in _READABLE_TYPES and declared not in _GENERIC_TYPES:
                    raise _unsupported(url, declared)  # before downloading a video or an archive
                body, truncated = await _read_capped(resp, self.config.max_bytes)
                return await _to_page(url, declared, resp.charset, body, truncated, self.config.max_bytes,
                                      self.extractor, self._off_loop)
        raise PageError(f"{url}: more than {self.config.max_redirects} redirects (fetch.max_redirects).")

    async def _off_loop(self, work: Callable[..., T], *args: Any) -> T:
        """``work(*args)`` on the extraction thread, so the event loop goes on serving other fetches."""
        return await asyncio.get_running_loop().run_in_executor(self._extraction, functools.partial(work, *args))

    async def aclose(self) -> None:
        """Close the connection pool (the extraction thread stays for a later fetch)."""
        if self._session is not None:
            await self._session.close()
            self._session = None


async def _read_capped(resp: aiohttp.ClientResponse, max_bytes: int) -> tuple[bytes, bool]:
    """Read at most ``max_bytes`` of the body; report whether more was there."""
    buf = bytearray()
    async for chunk in resp.content.iter_chunked(_CHUNK_BYTES):
        buf += chunk
        if len(buf) > max_bytes:
            del buf[max_bytes:]
            return bytes(buf), True
    return bytes(buf), False


def _sniff_type(body: bytes) -> str:
    """Guess a content type when the server sends none (or a generic one)."""
    head = body[:1024].lstrip().lower()
    if head.startswith(b"%pdf-"):
        return "application/pdf"
    if head.startswith((b"<!doctype html", b"<html")) or b"<body" in head:
        return "text/html"
    return "application/octet-stream"


def _decode(body: bytes, charset: str | None, is_html: bool) -> str:
    """Decode with the header's charset, else (for HTML) a ``<meta charset>``, else UTF-8."""
    if charset is None and is_html:
        match = _META_CHARSET_RE.search(body[:4096])
        charset = match.group(1).decode("ascii") if match else None
    return decode_bytes(body, charset)


def _pdf_text(body: bytes) -> tuple[str, str]:
    import pypdf  # imported here: only PDF pages pay for it

    reader = pypdf.PdfReader(io.BytesIO(body))
    text = "\n\n".join((page.extract_text() or "").strip() for page in reader.pages)
    title = str((reader.metadata or {}).get("/Title") or "")
    return title, text


async def _to_page(
    url: str, content_type: str, charset: str | None, body: bytes, truncated: bool, max_bytes: int,
    extractor: Extractor, off_loop: Callable[..., Awaitable[Any]],
) -> Page:
    mime = _sniff_type(body) if content_type in _GENERIC_TYPES else content_type
    if mime in _HTML_TYPES:
        html = _decode(body, charset, is_html=True)
        text = await off_loop(html_to_text, html, None, extractor)
        return Page(url=url, title=html_title(html), html=html, text=text, content_type="text/html")
    if mime in _PDF_TYPES:
        if truncated:
            raise PageError(f"{url}: PDF larger than fetch.max_bytes={max_bytes}; raise it to read this file.")
        try:
            title, text = await off_loop(_pdf_text, body)
        except Exception as exc:  # noqa: BLE001 - pypdf raises many types on broken files
            raise PageError(f"{url}: PDF could not be read ({type(exc).__name__}: {exc}).") from None
        return Page(url=url, title=title, text=text, content_type="application/pdf")
    if mime in _TEXT_TYPES:
        return Page(url=url, text=_decode(body, charset, is_html=False), content_type=mime)
    raise _unsupported(url, mime)


def _unsupported(url: str, content_type: str) -> UnsupportedContentError:
    return UnsupportedContentError(
        f"{url}: unsupported content type {content_type or '(none)'}; only HTML, PDF and plain text pages can be read."
    )
