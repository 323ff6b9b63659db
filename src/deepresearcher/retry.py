"""How every remote call in the package paces itself, reads an HTTP failure and waits before a retry.

One limits type (:class:`Limits`), one rate limiter (a token bucket), one backoff schedule, one
``Retry-After`` parser, one map from an HTTP status to an error (:func:`error_for_status`) and one
aiohttp session per event loop (:class:`LoopSession`), shared by the search backends (``web.resilience``,
``web.backends``) and the model HTTP client (``inference.http``), so a search API and a model server are
treated alike. It imports only ``deepresearcher.errors``, so any layer may use it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

import aiohttp

from deepresearcher.errors import (
    BackendUnavailableError,
    BadResponseError,
    ConfigError,
    DeepResearcherError,
    RateLimitedError,
)

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
"""Statuses worth another attempt: timeouts, conflicts, rate limits and server-side failures."""

REFUSED_STATUS = frozenset({401, 403})
"""Statuses that say the key or the server's settings need fixing: a config error, never retried."""


@dataclass(frozen=True)
class Limits:
    """How one client treats its server: timeout, retries and backoff, caps on calls in flight and starts
    per second (None: no cap), and, for clients behind a circuit breaker (``web.resilience``), when it opens.

    The defaults are a model server's (``LLMClientConfig``); a search backend's come from ``BackendSettings``.
    """

    timeout_s: float = 60.0
    retries: int = 4
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    concurrency: int | None = None
    rate_per_s: float | None = None
    burst: int = 1
    breaker_failures: int = 5
    breaker_reset_s: float = 30.0


def error_for_status(status: int, where: str, detail: str, *, retry_after: str | None = None,
                     refused_hint: str = "check the API key") -> DeepResearcherError:
    """The error an HTTP answer of ``status`` (400 or above) from ``where`` stands for, one map for every client:

        429                 -> RateLimitedError (with Retry-After, seconds or an HTTP date); retried
        408, 409, 5xx       -> BackendUnavailableError; retried
        401, 403            -> ConfigError naming ``refused_hint`` (the key or the server's settings); not retried
        other 4xx           -> BadResponseError (the same request gets the same answer); not retried
    """
    if status == 429:
        wait = parse_retry_after(retry_after)
        return RateLimitedError(f"{where} answered 429 Too Many Requests (Retry-After: {wait}): {detail}",
                                retry_after=wait)
    if status in REFUSED_STATUS:
        return ConfigError(f"{where} refused the request with HTTP {status}: {refused_hint}.")
    if status in RETRYABLE_STATUS or status >= 500:
        return BackendUnavailableError(f"{where} answered HTTP {status}: {detail}")
    return BadResponseError(f"{where} answered HTTP {status}: {detail}")


class LoopSession:
    """An aiohttp session that belongs to the running event loop, made anew when the loop changes.

    A session (and its connector) made in one loop cannot be used in the next, as successive CLI commands
    and test cases each run their own loop; ``get`` hands out the current loop's session, ``fresh_loop`` says
    whether the last ``get`` met a new loop, so the owner can remake its loop-bound locks too.
    """

    def __init__(self, make: Callable[[], aiohttp.ClientSession]) -> None:
        self._make = make
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.fresh_loop = False

    def get(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        self.fresh_loop = self._loop is not loop
        if self._session is None or self._session.closed or self.fresh_loop:
            self._loop = loop
            self._session = self._make()
        return self._session

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


class RateLimiter:
    """Request starts at ``rate`` per second, with up to ``burst`` at once after a quiet spell.

    A token bucket: ``rate`` tokens per second, at most ``burst`` saved up; ``acquire`` takes one,
    waiting if none is left. ``burst=1`` spaces starts ``1 / rate`` seconds apart; ``rate=None`` never
    waits. Waiters are served in arrival order.
    """

    def __init__(self, rate: float | None, burst: int = 1) -> None:
        if rate is not None and rate <= 0:
            raise ValueError(f"rate must be positive or None, not {rate}")
        self.rate = rate
        self.burst = float(max(1, burst))
        self._tokens = self.burst
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        if self.rate is None:
            return
        async with self._lock:
            while True:
                now = time.monotonic()
                self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
                self._stamp = now
                if self._tokens >= 1.0:
                    self._tokens -= 1.0
                    return
                await asyncio.sleep((1.0 - self._tokens) / self.rate)


def backoff_delay(attempt: int, base_s: float, cap_s: float, retry_after: float | None = None) -> float:
    """Seconds to wait before retry ``attempt + 1``: the server's ``Retry-After`` if it gave one, else
    exponential backoff with full jitter (uniform in ``[0, base_s * 2**attempt]``); capped by ``cap_s`` either way.

    Full jitter spreads the retries of many clients that failed together, so they do not come back as one wave.
    """
    if retry_after is not None:
        return min(retry_after, cap_s)
    return random.uniform(0.0, min(cap_s, base_s * 2**attempt))


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (a number of seconds or an HTTP date); None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError):
        return None
