"""The one client for OpenAI-compatible model servers (vLLM, SGLang, hosted APIs), for the policy and the
reader or judge alike: JSON in, JSON out, over one aiohttp session.

What a rollout fleet needs from it, in the order a call meets it:

1. a cap on requests in flight (``concurrency``; None: no cap) and on request starts per second
   (``rate_per_s``, :class:`~deepresearcher.retry.RateLimiter`);
2. a timeout on each attempt (``timeout_s``);
3. bounded retries (``retries``) on 408, 409, 429, 5xx, timeouts and network errors, after
   exponential backoff with full jitter, or after the server's ``Retry-After`` (capped by ``max_backoff_s``).
   Other 4xx answers are the caller's mistake and are raised at once.

Failures are the errors of ``deepresearcher.errors``, by the package's one map (``retry.error_for_status``, which
the search backends use too): ``RateLimitedError`` (429), ``BackendUnavailableError`` (5xx, 408/409, timeout,
network), ``ConfigError`` (401/403: the key or the server's settings), ``BadResponseError`` (other 4xx, a body
that is not JSON). Callers that promise other errors (a policy raises ``GenerationError``) map the backend
errors at their edge. Retries and final failures
are counted in ``counts`` (the reader passes its ``Usage``). The API key is read from the environment variable
a config names; it travels only in a header, and no message or ``repr`` built here shows it.

Example::

    async with OpenAIHttpClient("http://gpu:8000/v1", limits=Limits(retries=2)) as http:
        body = await http.post("/completions", {"model": "qwen", "prompt": [1, 2, 3], "max_tokens": 8})
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
import orjson
from typing_extensions import Self

from deepresearcher.errors import (
    BackendUnavailableError,
    BadResponseError,
    ConfigError,
    RateLimitedError,
)
from deepresearcher.retry import (
    Limits,
    LoopSession,
    RateLimiter,
    backoff_delay,
    error_for_status,
)

logger = logging.getLogger(__name__)


class RetryCounts(Protocol):
    """Where a client counts its retries and the calls it gave up on (``llm.base.Usage`` is one)."""

    retries: int
    failures: int


@dataclass
class Tally:
    """The counts of a client nobody else counts for."""

    retries: int = 0
    failures: int = 0


class OpenAIHttpClient:
    """JSON requests to one OpenAI-compatible ``/v1`` root, with the limits and retries of the module docstring."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key_env: str | None = None,
        limits: Limits | None = None,
        counts: RetryCounts | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.limits = limits or Limits()
        self.counts: RetryCounts = counts if counts is not None else Tally()
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key_env:
            key = os.environ.get(api_key_env, "").strip()
            if not key:
                raise ConfigError(
                    f"Environment variable {api_key_env} (the API key variable of {self.base_url}) is not set; "
                    "export the key there, or name no key variable for a server without keys."
                )
            self._headers["Authorization"] = f"Bearer {key}"
        self._session = LoopSession(lambda: aiohttp.ClientSession(
            headers=self._headers,
            timeout=aiohttp.ClientTimeout(total=self.limits.timeout_s),
            connector=aiohttp.TCPConnector(limit=0),  # the semaphore is the only cap
        ))
        self._slots: asyncio.Semaphore | None = None
        self._limiter = RateLimiter(self.limits.rate_per_s)

    def __repr__(self) -> str:  # never the headers: they hold the key
        return f"OpenAIHttpClient(base_url={self.base_url!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._session.aclose()

    async def post(self, path: str, payload: dict[str, Any]) -> Any:
        """POST ``payload`` to ``base_url + path``; the decoded JSON answer, after retries if needed."""
        return await self._call("POST", path, orjson.dumps(payload))

    async def get(self, path: str) -> Any:
        """GET ``base_url + path``; the decoded JSON answer, after retries if needed."""
        return await self._call("GET", path, None)

    async def first_model(self) -> str:
        """The first model the server lists under ``/models``, for when none is configured."""
        body = await self.get("/models")
        try:
            return str(body["data"][0]["id"])
        except (KeyError, IndexError, TypeError) as exc:
            raise BadResponseError(f"{self.base_url}/models lists no model: {str(body)[:200]}") from exc

    def _bind_loop(self) -> aiohttp.ClientSession:
        """The running loop's session; on a new loop the cap and the rate limiter are made anew too
        (a lock of a finished loop cannot be used in the next)."""
        session = self._session.get()
        if self._session.fresh_loop:
            concurrency = self.limits.concurrency
            self._slots = asyncio.Semaphore(concurrency) if concurrency else None
            self._limiter = RateLimiter(self.limits.rate_per_s)
        return session

    async def _call(self, method: str, path: str, data: bytes | None) -> Any:
        url = self.base_url + path
        session = self._bind_loop()
        limits = self.limits
        last: RateLimitedError | BackendUnavailableError | None = None
        for attempt in range(limits.retries + 1):
            if attempt:
                self.counts.retries += 1
            retry_after: float | None = None
            try:
                async with self._slots or contextlib.nullcontext():
                    await self._limiter.acquire()
                    return await self._attempt(session, method, url, data)
            except RateLimitedError as exc:
                last, retry_after = exc, exc.retry_after
            except BackendUnavailableError as exc:
                last = exc
            if attempt < limits.retries:
                delay = backoff_delay(attempt, limits.backoff_s, limits.max_backoff_s, retry_after)
                logger.info("%s; retry %d/%d in %.2fs", last, attempt + 1, limits.retries, delay)
                await asyncio.sleep(delay)
        self.counts.failures += 1
        assert last is not None
        raise type(last)(
            f"{last} (gave up after {limits.retries} retries; check the server, or allow more retries)"
        ) from last

    async def _attempt(self, session: aiohttp.ClientSession, method: str, url: str, data: bytes | None) -> Any:
        """One HTTP exchange, with aiohttp's errors and the server's statuses mapped onto ours."""
        try:
            async with session.request(method, url, data=data) as response:
                status = response.status
                raw = await response.read()
                retry_after = response.headers.get("Retry-After")
        except asyncio.TimeoutError as exc:
            raise BackendUnavailableError(f"{url} did not answer within {self.limits.timeout_s:g}s") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise BackendUnavailableError(f"{url} is unreachable: {exc}") from exc
        if status >= 400:
            detail = raw[:300].decode(errors="replace")
            raise error_for_status(status, url, detail, retry_after=retry_after,
                                   refused_hint="check the key named by api_key_env and the server's access settings")
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            detail = raw[:120].decode(errors="replace")
            raise BadResponseError(f"{url} answered a body that is not JSON: {detail!r}") from exc
