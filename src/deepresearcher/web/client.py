"""A client for a list of handler services that behaves exactly like the in-process environment.

``RemoteEnvironment`` has the same ``search``/``browse``/``aclose`` as ``WebEnvironment`` (see
``web.interface.Environment``), so rollouts, training and evaluation take either one.

How requests are spread and retried:

* each request goes to the live server with the fewest requests in flight (ties rotate round robin);
* when a server refuses the connection, times out, drops the connection or answers 5xx, the same
  request is sent to the next server (search and browse are idempotent: the cache dedups them);
* a server that failed that way is marked dead for ``env.dead_for_s`` seconds and skipped, then
  tried again with live traffic; dead servers are still tried as a last resort, so a request only
  fails after ``env.max_attempts`` servers failed it;
* a 4xx answer (invalid request, wrong token, replay miss) would fail on every server, so it raises
  at once: :class:`RequestRejectedError`, :class:`ConfigError` (token) or :class:`ReplayMissError`.

Example::

    env = make_remote_environment(load_config(overrides=["env.server_urls=[http://h1:8000,http://h2:8000]"]))
    results = await env.search(["who wrote dune"], top_k=10)
    await env.aclose()
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
import orjson
from pydantic import BaseModel, ValidationError

from deepresearcher.config import Config, EnvConfig
from deepresearcher.errors import (
    BackendUnavailableError,
    BadResponseError,
    ConfigError,
    ReplayMissError,
    RequestRejectedError,
)
from deepresearcher.web.types import BrowseResult, QueryResult

logger = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)


class _SearchResponse(BaseModel):
    results: list[QueryResult]


class _BrowseResponse(BaseModel):
    results: list[BrowseResult]


@dataclass
class ServerState:
    """What the client knows about one server: load now, and whether it is being skipped."""

    url: str
    in_flight: int = 0
    dead_until: float = 0.0
    failures: int = 0
    served: int = 0

    def alive(self, now: float) -> bool:
        return self.dead_until <= now


class _Failover(Exception):
    """This server could not answer this request; another one may."""

    def __init__(self, reason: str, mark_dead: bool) -> None:
        super().__init__(reason)
        self.mark_dead = mark_dead


class RemoteEnvironment:
    """Search and browse through handler services at ``server_urls``, with load spreading and failover."""

    def __init__(
        self,
        server_urls: list[str],
        *,
        token: str | None = None,
        request_timeout_s: float = 120.0,
        connect_timeout_s: float = 5.0,
        max_attempts: int = 3,
        dead_for_s: float = 30.0,
        max_connections: int = 256,
    ) -> None:
        if not server_urls:
            raise ConfigError("RemoteEnvironment needs at least one server URL; set env.server_urls.")
        self.servers = [ServerState(url.rstrip("/")) for url in server_urls]
        self.max_attempts = max_attempts
        self.dead_for_s = dead_for_s
        self._headers = {"Content-Type": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._timeout = aiohttp.ClientTimeout(total=request_timeout_s, sock_connect=connect_timeout_s)
        self._max_connections = max_connections
        self._rotation = itertools.count()
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def from_config(cls, config: EnvConfig) -> RemoteEnvironment:
        """Build from the ``env`` section; the bearer token is read from the variable it names."""
        token = None
        if config.auth_token_env:
            token = os.environ.get(config.auth_token_env)
            if not token:
                raise ConfigError(
                    f"env.auth_token_env names ${config.auth_token_env}, but it is unset or empty; export the handlers' token there."
                )
        return cls(
            config.server_urls,
            token=token,
            request_timeout_s=config.request_timeout_s,
            connect_timeout_s=config.connect_timeout_s,
            max_attempts=config.max_attempts,
            dead_for_s=config.dead_for_s,
            max_connections=config.max_connections,
        )

    # ------------------------------------------------------------------ the Environment interface

    async def search(self, queries: list[str], top_k: int | None = None) -> list[QueryResult]:
        """One result per query, from whichever server answers first without failing (``top_k`` None:
        the servers' ``search.top_k``)."""
        body: dict[str, Any] = {"queries": queries} if top_k is None else {"queries": queries, "top_k": top_k}
        response = await self._call("/v1/search", body, _SearchResponse)
        return response.results

    async def browse(
        self, question: str, urls: list[str], notes: list[str] | None = None, queries: list[str] | None = None
    ) -> list[BrowseResult]:
        """One result per URL; the rollout's notes and queries travel with the request."""
        body = {"question": question, "urls": urls, "notes": notes or [], "queries": queries or []}
        response = await self._call("/v1/browse", body, _BrowseResponse)
        return response.results

    async def aclose(self) -> None:
        """Close the connection pool."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> RemoteEnvironment:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ spreading and failover

    def _pick(self, tried: set[int]) -> int:
        """The least-loaded live server not yet tried; else the untried one dead longest; else any."""
        now = time.monotonic()
        n = len(self.servers)
        start = next(self._rotation) % n
        order = [(start + i) % n for i in range(n)]
        untried = [i for i in order if i not in tried] or order
        live = [i for i in untried if self.servers[i].alive(now)]
        if live:
            return min(live, key=lambda i: self.servers[i].in_flight)  # min keeps the rotated order on ties
        return min(untried, key=lambda i: self.servers[i].dead_until)

    async def _call(self, path: str, body: dict[str, Any], model: type[T]) -> T:
        payload = orjson.dumps(body)
        tried: set[int] = set()
        reasons: list[str] = []
        for attempt in range(self.max_attempts):
            index = self._pick(tried)
            server = self.servers[index]
            if index in tried:  # every server failed once already: give them a moment
                await asyncio.sleep(min(2.0, 0.1 * 2**attempt))
            tried.add(index)
            try:
                result = await self._send(server, path, payload, model)
            except _Failover as failure:
                reasons.append(f"{server.url}: {failure}")
                server.failures += 1
                if failure.mark_dead:
                    server.dead_until = time.monotonic() + self.dead_for_s
                logger.warning("handler %s failed %s (%s); trying another", server.url, path, failure)
                continue
            server.served += 1
            return result
        raise BackendUnavailableError(
            f"No handler answered {path} after {len(reasons)} attempt(s): " + "; ".join(reasons)
            + ". Check that the servers in env.server_urls are running (GET /healthz)."
        )

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=0, limit_per_host=self._max_connections)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout, headers=self._headers)
        return self._session

    async def _send(self, server: ServerState, path: str, payload: bytes, model: type[T]) -> T:
        server.in_flight += 1
        try:
            async with self._get_session().post(server.url + path, data=payload) as resp:
                data = await resp.read()
                status = resp.status
        except asyncio.TimeoutError:
            raise _Failover("timed out", mark_dead=True) from None
        except aiohttp.ClientError as exc:
            raise _Failover(f"{type(exc).__name__}: {exc}", mark_dead=True) from None
        finally:
            server.in_flight -= 1
        if status == 200:
            try:
                return model.model_validate_json(data)
            except ValidationError as exc:
                raise BadResponseError(f"{server.url}{path} answered 200 with an unexpected body: {exc}") from None
        message = _error_message(data)
        if status >= 500:
            # 502: its upstream failed; 503: it is overloaded. Both are alive, so only 500/504 mark it dead.
            raise _Failover(f"HTTP {status}: {message}", mark_dead=status not in (502, 503))
        if status in (401, 403):
            raise ConfigError(
                f"{server.url} refused the token (HTTP {status}): {message} Set env.auth_token_env to the variable "
                "holding the handlers' token (serve.auth_token_env on the servers)."
            )
        if status == 409:
            raise ReplayMissError(message)
        raise RequestRejectedError(f"{server.url}{path} rejected the request (HTTP {status}): {message}", status)


def _error_message(data: bytes) -> str:
    try:
        return str(orjson.loads(data)["error"]["message"])
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return data[:300].decode("utf-8", errors="replace")


def make_remote_environment(config: Config) -> RemoteEnvironment:
    """The client for ``config.env.server_urls`` (the lead's ``make_environment`` picks it when the list is set)."""
    return RemoteEnvironment.from_config(config.env)
