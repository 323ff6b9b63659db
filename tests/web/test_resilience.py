"""ResilientBackend over real HTTP: retries on 429/5xx, Retry-After, timeouts, limits and the circuit breaker."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from deepresearcher.errors import BackendUnavailableError, BadResponseError, RateLimitedError
from deepresearcher.testing.emulators import Fault, SearchEmulator
from deepresearcher.web.backends.searxng import SearxngBackend
from deepresearcher.web.resilience import SEARCH_LIMITS, ResilientBackend

DOCS = [{"url": f"https://example.org/{i}", "title": f"Doc {i}", "text": f"topic {i} common words"} for i in range(5)]
FAST = dict(backoff_s=0.01, max_backoff_s=1.0, rate_per_s=1000.0, burst=1000)


@pytest.fixture
def emu() -> Iterator[SearchEmulator]:
    with SearchEmulator(DOCS, flavor="searxng").running() as server:
        yield server


def wrap(emu: SearchEmulator, **policy: float) -> ResilientBackend:
    return ResilientBackend(SearxngBackend(emu.base_url), replace(SEARCH_LIMITS, **{**FAST, **policy}))


async def test_429_is_retried_after_retry_after_and_succeeds(emu: SearchEmulator) -> None:
    """Two 429s asking for 0.15 s each: the third attempt answers, no sooner than the server asked."""
    backend = wrap(emu, retries=3)
    emu.script(Fault(429, retry_after=0.15), Fault(429, retry_after=0.15))
    start = time.monotonic()
    hits = await backend.search("topic 3", 3)
    assert hits[0].url == "https://example.org/3"
    assert emu.calls == 3
    assert time.monotonic() - start >= 0.3
    assert backend.breaker.state == "closed"
    await backend.aclose()


async def test_retry_after_is_capped_by_max_backoff(emu: SearchEmulator) -> None:
    backend = wrap(emu, retries=1, max_backoff_s=0.05)
    emu.script(Fault(429, retry_after=3600))
    start = time.monotonic()
    assert await backend.search("topic", 1)
    assert time.monotonic() - start < 1.0
    await backend.aclose()


async def test_5xx_is_retried_and_the_last_error_raised_when_attempts_run_out(emu: SearchEmulator) -> None:
    backend = wrap(emu, retries=2)
    emu.script(Fault(500), Fault(503))
    assert await backend.search("topic", 1)
    assert emu.calls == 3
    emu.reset_counts()
    emu.script(Fault(429, retry_after=0), Fault(429, retry_after=0), Fault(429, retry_after=0))
    with pytest.raises(RateLimitedError):
        await backend.search("topic", 1)
    assert emu.calls == 3  # retries=2: three attempts in all
    await backend.aclose()


async def test_bad_response_is_not_retried(emu: SearchEmulator) -> None:
    backend = wrap(emu, retries=3)
    emu.script(Fault(200))
    with pytest.raises(BadResponseError):
        await backend.search("topic", 1)
    assert emu.calls == 1
    await backend.aclose()


async def test_slow_upstream_times_out(emu: SearchEmulator) -> None:
    backend = wrap(emu, retries=1, timeout_s=0.1)
    emu.delay_s = 1.0
    start = time.monotonic()
    with pytest.raises(BackendUnavailableError, match="within 0.1s"):
        await backend.search("topic", 1)
    assert time.monotonic() - start < 0.9
    assert emu.calls == 2
    await backend.aclose()


async def test_circuit_opens_fails_fast_and_recovers(emu: SearchEmulator) -> None:
    """Three failures open the breaker: the next call fails at once without reaching the server;
    after the reset time one trial call goes through and closes it."""
    backend = wrap(emu, retries=0, breaker_failures=3, breaker_reset_s=0.3)
    emu.fail_always(Fault(500))
    for _ in range(3):
        with pytest.raises(BackendUnavailableError, match="HTTP 500"):
            await backend.search("topic", 1)
    assert backend.breaker.state == "open"
    start = time.monotonic()
    with pytest.raises(BackendUnavailableError, match="circuit breaker is open"):
        await backend.search("topic", 1)
    assert time.monotonic() - start < 0.05
    assert emu.calls == 3

    await asyncio.sleep(0.35)
    with pytest.raises(BackendUnavailableError, match="HTTP 500"):  # the half-open trial fails: open again
        await backend.search("topic", 1)
    assert backend.breaker.state == "open" and emu.calls == 4

    emu.fail_always(None)
    await asyncio.sleep(0.35)
    assert await backend.search("topic", 1)
    assert backend.breaker.state == "closed"
    await backend.aclose()


async def test_only_one_trial_call_while_half_open(emu: SearchEmulator) -> None:
    backend = wrap(emu, retries=0, breaker_failures=1, breaker_reset_s=0.1)
    emu.fail_always(Fault(500))
    with pytest.raises(BackendUnavailableError):
        await backend.search("topic", 1)
    await asyncio.sleep(0.15)
    emu.fail_always(Fault(500, delay_s=0.1))
    results = await asyncio.gather(*(backend.search("topic", 1) for _ in range(5)), return_exceptions=True)
    assert all(isinstance(r, BackendUnavailableError) for r in results)
    assert emu.calls == 2  # the first failure and one trial; the other four failed fast
    await backend.aclose()


async def test_concurrency_cap_and_rate_limit(emu: SearchEmulator) -> None:
    """At most `concurrency` requests in flight; a bucket of 1 at 20/s spaces 5 calls over >= 0.2 s."""
    emu.delay_s = 0.05
    capped = wrap(emu, concurrency=2)
    await asyncio.gather(*(capped.search(f"topic {i}", 1) for i in range(8)))
    assert emu.max_in_flight == 2
    await capped.aclose()

    emu.delay_s = 0.0
    limited = wrap(emu, rate_per_s=20.0, burst=1)
    start = time.monotonic()
    await asyncio.gather(*(limited.search(f"topic {i}", 1) for i in range(5)))
    assert time.monotonic() - start >= 0.19
    await limited.aclose()


def test_limits_are_the_backend_settings():
    """A backend's settings become its limits field by field; with none given, the settings' defaults apply."""
    from deepresearcher.config import BackendSettings
    from deepresearcher.web.resilience import limits_from_settings

    assert limits_from_settings(BackendSettings()) == SEARCH_LIMITS
    limits = limits_from_settings(BackendSettings(retries=7, timeout_s=2.5, breaker_failures=2, rate_per_s=3.0))
    assert (limits.retries, limits.timeout_s, limits.breaker_failures, limits.rate_per_s) == (7, 2.5, 2, 3.0)
