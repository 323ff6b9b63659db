"""A client for a list of handler services that behaves exactly like the in-process environment.

``RemoteEnvironment`` has the same ``search``/``browse``/``aclose`` as ``WebEnvironment`` (see
``web.interface.Environment``), so rollouts, training and evaluation take either one.

Where a request goes (``env.routing``):

* ``keyed`` (default): each search query and page URL has a *home* handler, chosen by rendezvous
  (highest-random-weight) hashing of its cache key (the normalized query or URL, as ``web.cache`` keys
  it) over the server URLs. Every client with the same ``env.server_urls`` (in any order) agrees on the
  homes, so the 16 rollouts of a group asking the same query all reach one handler, whose cache pays
  for it once; the handlers' caches hold disjoint shares. A batch is split by home and the parts are
  sent concurrently; answers come back in the caller's order. Adding or removing a handler moves only
  the keys it gains or loses.
* ``least_loaded``: the whole request goes to the live server with the fewest requests in flight (ties
  rotate round robin); a query is paid once by every handler that sees it.

How requests are retried (both modes):

* when a server refuses the connection, times out, drops the connection or answers 5xx, the same
  request (with ``keyed``: the same query or URL) goes to the next server, with ``keyed`` the next in that
  key's rendezvous order; search and browse are idempotent, so a retry is safe;
* a server that failed that way is marked dead for ``env.dead_for_s`` seconds and skipped, then tried
  again with live traffic (a key's home takes its keys back); dead servers are still tried as a last
  resort, so a query or URL only fails after ``env.max_attempts`` servers failed it;
* a 4xx answer (invalid request, wrong token, replay miss) would fail on every server, so it raises
  at once: :class:`RequestRejectedError`, :class:`ConfigError` (token) or :class:`ReplayMissError`.

Example::

    env = make_remote_environment(load_config(overrides=["env.server_urls=[http://h1:8000,http://h2:8000]"]))
    results = await env.search(["who wrote dune"], top_k=10)
    await env.aclose()
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

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
from deepresearcher.web.cache import normalize_text, normalize_url
from deepresearcher.web.types import BrowseResult, QueryResult

logger = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)

Routing = Literal["keyed", "least_loaded"]
ROUTINGS: tuple[str, ...] = ("keyed", "least_loaded")

# The key each route's items are homed by: the same normalized form the cache keys searches and page
# fetches by, so two requests one cache record answers always meet on one handler.
_ROUTING_KEYS: dict[str, Callable[[str], str]] = {"/v1/search": normalize_text, "/v1/browse": normalize_url}


def routing_key(path: str, item: str) -> str:
    """The key a query (``path`` ``/v1/search``) or URL (``/v1/browse``) is homed by."""
    return _ROUTING_KEYS[path](item)


def rendezvous_order(key: str, urls: Sequence[str]) -> list[int]:
    """Indices of ``urls``, best first, for ``key``: highest random weight (rendezvous) hashing.

    Each (server, key) pair gets a pseudo-random score that every process computes alike; the key's home
    is the top scorer and its failover order the rest. Keys spread evenly, the order of ``urls`` does not
    matter, and removing a server moves only the keys it was home to.
    """
    scores = [
        int.from_bytes(hashlib.blake2b(f"{url.rstrip('/')}\x1f{key}".encode(), digest_size=8).digest(), "big")
        for url in urls
    ]
    return sorted(range(len(urls)), key=lambda i: -scores[i])


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
    served: int = 0  # requests answered (a batch split by home counts once per part)

    def alive(self, now: float) -> bool:
        return self.dead_until <= now


class _Failover(Exception):
    """This server could not answer this request; another one may."""

    def __init__(self, reason: str, mark_dead: bool) -> None:
        super().__init__(reason)
        self.mark_dead = mark_dead


class RemoteEnvironment:
    """Search and browse through handler services at ``server_urls``, routed by key (or load), with failover."""

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
        routing: Routing = "keyed",
    ) -> None:
        if not server_urls:
            raise ConfigError("RemoteEnvironment needs at least one server URL; set env.server_urls.")
        if routing not in ROUTINGS:
            raise ConfigError(f"Unknown routing {routing!r}; set env.routing to one of {', '.join(ROUTINGS)}.")
        self.servers = [ServerState(url.rstrip("/")) for url in server_urls]
        self.routing = routing
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
            routing=config.routing,
        )

    # ------------------------------------------------------------------ the Environment interface

    async def search(self, queries: list[str], top_k: int | None = None) -> list[QueryResult]:
        """One result per query, in order (``top_k`` None: the servers' ``search.top_k``)."""

        def body(part: list[str]) -> dict[str, Any]:
            return {"queries": part} if top_k is None else {"queries": part, "top_k": top_k}

        return await self._call("/v1/search", queries, body, _SearchResponse)

    async def browse(
        self, question: str, urls: list[str], notes: list[str] | None = None, queries: list[str] | None = None
    ) -> list[BrowseResult]:
        """One result per URL, in order; the rollout's notes and queries travel with every part."""

        def body(part: list[str]) -> dict[str, Any]:
            return {"question": question, "urls": part, "notes": notes or [], "queries": queries or []}

        return await self._call("/v1/browse", urls, body, _BrowseResponse)

    async def aclose(self) -> None:
        """Close the connection pool."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> RemoteEnvironment:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ routing and failover

    def home_order(self, path: str, item: str) -> list[int]:
        """Indices of :attr:`servers` in the order ``keyed`` routing tries them for a query or URL."""
        return rendezvous_order(routing_key(path, item), [s.url for s in self.servers])

    def _least_loaded(self) -> list[int]:
        """Servers by requests in flight, fewest first; ties keep a rotating order (round robin)."""
        n = len(self.servers)
        start = next(self._rotation) % n
        return sorted(((start + i) % n for i in range(n)), key=lambda i: self.servers[i].in_flight)

    def _pick(self, order: list[int], tried: set[int]) -> int:
        """The first live server in ``order`` not yet tried; else the untried one dead longest; else any."""
        now = time.monotonic()
        untried = [i for i in order if i not in tried] or order
        for i in untried:
            if self.servers[i].alive(now):
                return i
        return min(untried, key=lambda i: self.servers[i].dead_until)  # min keeps the order on ties

    def _split(self, path: str, items: list[str], pending: list[int], tried: list[set[int]]) -> dict[int, list[int]]:
        """Server index -> the pending items it is sent now: by each item's home (keyed), or all to one."""
        if self.routing == "least_loaded":  # the request moves as a whole, so its items share one history
            return {self._pick(self._least_loaded(), tried[pending[0]]): pending}
        parts: dict[int, list[int]] = {}
        for j in pending:
            parts.setdefault(self._pick(self.home_order(path, items[j]), tried[j]), []).append(j)
        return parts

    async def _call(
        self, path: str, items: list[str], body: Callable[[list[str]], dict[str, Any]], model: type[Any]
    ) -> list[Any]:
        """Answer ``items`` (queries or URLs) in order: each part to its server, failed parts to the next.
        No items, no request: ``[]``, as the in-process environment answers."""
        results: list[Any] = [None] * len(items)
        tried: list[set[int]] = [set() for _ in items]
        reasons: list[list[str]] = [[] for _ in items]
        pending = list(range(len(items)))
        for attempt in range(self.max_attempts):
            if not pending:
                break
            parts = self._split(path, items, pending, tried)
            sends = [
                self._attempt(index, path, body([items[j] for j in part]), model, attempt,
                              retry=any(index in tried[j] for j in part))
                for index, part in parts.items()
            ]
            if len(sends) == 1:
                answers: list[Any] = [await sends[0]]
            else:
                answers = await asyncio.gather(*sends, return_exceptions=True)
            rejected = next((a for a in answers if isinstance(a, BaseException) and not isinstance(a, _Failover)), None)
            if rejected is not None:  # a 4xx (or a bad body) would fail on every server
                raise rejected
            pending = []
            for (index, part), answer in zip(parts.items(), answers):
                if isinstance(answer, _Failover):
                    for j in part:
                        tried[j].add(index)
                        reasons[j].append(f"{self.servers[index].url}: {answer}")
                    pending += part
                elif len(answer.results) != len(part):
                    raise BadResponseError(
                        f"{self.servers[index].url}{path} answered {len(answer.results)} results for {len(part)} items."
                    )
                else:
                    for j, result in zip(part, answer.results):
                        results[j] = result
            pending.sort()
        if pending:
            failed = reasons[pending[0]]
            raise BackendUnavailableError(
                f"No handler answered {path} after {len(failed)} attempt(s): " + "; ".join(failed)
                + ". Check that the servers in env.server_urls are running (GET /healthz)."
            )
        return results

    async def _attempt(
        self, index: int, path: str, body: dict[str, Any], model: type[T], attempt: int, *, retry: bool
    ) -> T | _Failover:
        """One try on one server: its answer, or the :class:`_Failover` that says why another should try."""
        server = self.servers[index]
        if retry:  # every server failed this once already: give them a moment
            await asyncio.sleep(min(2.0, 0.1 * 2**attempt))
        try:
            result = await self._send(server, path, orjson.dumps(body), model)
        except _Failover as failure:
            server.failures += 1
            if failure.mark_dead:
                server.dead_until = time.monotonic() + self.dead_for_s
            logger.warning("handler %s failed %s (%s); trying another", server.url, path, failure)
            return failure
        server.served += 1
        return result

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
