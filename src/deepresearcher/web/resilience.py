"""Keeps a live search backend within its limits and fails fast while it is down.

``ResilientBackend(backend, limits)`` wraps any :class:`~deepresearcher.web.backends.base.SearchBackend`
and is one itself. Each call goes through, in order:

1. the circuit breaker: while open, the call fails at once with ``BackendUnavailableError``;
2. a concurrency cap (semaphore) and a token bucket (sustained rate plus burst: ``retry.RateLimiter``);
3. a per-attempt timeout;
4. retries on 429, 408, 409, 5xx, timeouts and network errors, with exponential backoff and full jitter, waiting
   what a 429's ``Retry-After`` asks for (capped by ``max_backoff_s``): ``retry.backoff_delay``, as the model
   HTTP client does. A ``BadResponseError`` is not retried: the same request would get the same answer.

The breaker opens after ``breaker_failures`` consecutive failed attempts (429s do not count: a rate-limited
backend is up), stays open ``breaker_reset_s``, then lets one trial call through (half-open): success
closes it, failure opens it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import fields
from typing import TYPE_CHECKING

import aiohttp

from deepresearcher.errors import BackendUnavailableError, BadResponseError, RateLimitedError
from deepresearcher.retry import Limits, RateLimiter, backoff_delay
from deepresearcher.web.types import SearchHit

if TYPE_CHECKING:
    from deepresearcher.config import BackendSettings
    from deepresearcher.web.backends.base import SearchBackend

logger = logging.getLogger(__name__)


SEARCH_LIMITS = Limits(concurrency=8, rate_per_s=10.0, burst=10, timeout_s=15.0, retries=3)
"""A search backend's limits when none are given: ``BackendSettings``' defaults."""


def limits_from_settings(settings: BackendSettings) -> Limits:
    """The limits ``backends.<name>`` configures: every ``Limits`` field is a ``BackendSettings`` field of the
    same name and meaning (see the config for what each does)."""
    return Limits(**{field.name: getattr(settings, field.name) for field in fields(Limits)})


class CircuitBreaker:
    """Counts consecutive failures; open means "fail fast" until ``reset_s`` has passed."""

    def __init__(self, name: str, failures: int, reset_s: float) -> None:
        self.name = name
        self.threshold = failures
        self.reset_s = reset_s
        self.failures = 0
        self.opened_at: float | None = None
        self._trial_running = False

    @property
    def state(self) -> str:
        if self.opened_at is None:
            return "closed"
        return "half-open" if time.monotonic() - self.opened_at >= self.reset_s else "open"

    def before_call(self) -> bool:
        """Raise if the call must fail fast; return True when this call is the half-open trial."""
        state = self.state
        if state == "closed":
            return False
        if state == "half-open" and not self._trial_running:
            self._trial_running = True
            return True
        assert self.opened_at is not None
        wait = max(0.0, self.reset_s - (time.monotonic() - self.opened_at))
        raise BackendUnavailableError(
            f"Search backend {self.name!r} is failing ({self.failures} failures in a row); its circuit breaker "
            f"is open, retry in {wait:.0f}s. Check the backend's status or its base_url in backends.{self.name}."
        )

    def success(self) -> None:
        self.failures = 0
        self.opened_at = None
        self._trial_running = False

    def abort_trial(self) -> None:
        """The trial call ended without a verdict; let the next call be the trial."""
        self._trial_running = False

    def failure(self) -> None:
        self.failures += 1
        if self._trial_running or self.failures >= self.threshold:
            if self.opened_at is None or self._trial_running:
                logger.warning("circuit breaker of %s opened after %d failures", self.name, self.failures)
            self.opened_at = time.monotonic()
            self._trial_running = False


class ResilientBackend:
    """A backend with a concurrency cap, rate limit, timeouts, retries and a circuit breaker."""

    def __init__(self, backend: SearchBackend, limits: Limits = SEARCH_LIMITS) -> None:
        self.backend = backend
        self.name = backend.name
        self.limits = limits
        self.breaker = CircuitBreaker(self.name, self.limits.breaker_failures, self.limits.breaker_reset_s)
        self._slots = asyncio.Semaphore(limits.concurrency) if limits.concurrency else contextlib.nullcontext()
        self._bucket = RateLimiter(self.limits.rate_per_s, self.limits.burst)
        self.attempts = 0
        self.retried = 0

    async def _attempt(self, query: str, top_k: int) -> list[SearchHit]:
        async with self._slots:
            await self._bucket.acquire()
            self.attempts += 1
            try:
                return await asyncio.wait_for(self.backend.search(query, top_k), self.limits.timeout_s)
            except (asyncio.TimeoutError, TimeoutError) as exc:
                raise BackendUnavailableError(
                    f"Search backend {self.name!r} did not answer within {self.limits.timeout_s:g}s "
                    f"(backends.{self.name}.timeout_s)."
                ) from exc
            except (aiohttp.ClientError, OSError) as exc:
                raise BackendUnavailableError(
                    f"Search backend {self.name!r} is unreachable: {type(exc).__name__}."
                ) from exc

    async def search(self, query: str, top_k: int) -> list[SearchHit]:
        """Hits for ``query``, retried within the limits; raises the last error when attempts run out."""
        last: Exception | None = None
        for attempt in range(self.limits.retries + 1):
            trial = self.breaker.before_call()
            try:
                hits = await self._attempt(query, top_k)
            except BadResponseError:
                self.breaker.success()  # it answered, so it is up
                raise
            except RateLimitedError as exc:
                if trial:
                    self.breaker.success()
                last, retry_after = exc, exc.retry_after
            except BackendUnavailableError as exc:
                self.breaker.failure()
                last, retry_after = exc, None
            except BaseException:
                if trial:
                    self.breaker.abort_trial()  # not a verdict on the backend (bad key, cancelled call)
                raise
            else:
                self.breaker.success()
                return hits
            if attempt == self.limits.retries:
                break
            delay = backoff_delay(attempt, self.limits.backoff_s, self.limits.max_backoff_s, retry_after)
            self.retried += 1
            logger.info("%s: %s; retry %d in %.2fs", self.name, type(last).__name__, attempt + 1, delay)
            await asyncio.sleep(delay)
        assert last is not None
        raise last

    async def aclose(self) -> None:
        await self.backend.aclose()
