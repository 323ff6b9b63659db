"""How every remote call in the package paces itself and waits before a retry.

One rate limiter (a token bucket), one backoff schedule and one ``Retry-After`` parser, shared by the
search backends (``web.resilience``, ``web.backends``) and the model HTTP client (``inference.http``),
so a search API and a model server are treated alike. It imports nothing of the package, so any layer
may use it.
"""

from __future__ import annotations

import asyncio
import random
import time
from email.utils import parsedate_to_datetime

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
"""Statuses worth another attempt: timeouts, conflicts, rate limits and server-side failures."""


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
