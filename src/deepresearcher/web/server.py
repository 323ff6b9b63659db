"""The handler service: one web environment behind HTTP, shared by many trainers and evaluators.

Routes (JSON in, JSON out)::

    POST /v1/search  {"queries": ["q1", "q2"], "top_k": 10}          -> {"results": [QueryResult, ...]}
    POST /v1/browse  {"question": "...", "urls": [...], "notes": [...], "queries": [...]}
                                                                     -> {"results": [BrowseResult, ...]}
    POST /retrieve   Search-R1's retriever API; POST /access: ASearcher's pages by URL (web.retrieval_api)
    GET  /healthz    -> {"status": "ok", "in_flight": n, "waiting": n}
    GET  /metrics    -> Prometheus text format
    POST /mcp        with ``serve --mcp``: the agent's tools over MCP's streamable HTTP (``agent.mcp_server``)

Each request is a batch (many queries or URLs), answered in order. The service is stateless: the
rollout's notes and queries travel with every browse request, so any server in ``env.server_urls``
can answer any request and a dead one is simply skipped by the client.

Errors are JSON ``{"error": {"type": ..., "message": ...}}`` with a status that tells the client what
to do: 4xx (bad request, missing token, replay miss) will fail on any server, so it is not retried;
502/503/500 may succeed elsewhere, so the client fails over. A query or URL that fails upstream is not
an HTTP error at all: it comes back as a result whose ``error`` field the policy reads.

The environment opens once in the app's lifespan (``run_server`` builds it just before, so a handler
that cannot start says why in one line) and closes (flushing the cache) after uvicorn has let
in-flight requests finish on shutdown.
"""

from __future__ import annotations

import asyncio
import hmac
import inspect
import logging
import os
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from fastapi import FastAPI
from fastapi.responses import Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from deepresearcher.config import Config
from deepresearcher.errors import (
    BackendError,
    ConfigError,
    DeepResearcherError,
    PageError,
    ReplayMissError,
)
from deepresearcher.web import retrieval_api
from deepresearcher.web.interface import Environment
from deepresearcher.web.retrieval_api import AccessRequest, RetrievalSource, RetrieveRequest
from deepresearcher.web.types import BrowseResult, QueryResult

logger = logging.getLogger(__name__)

EnvironmentFactory = Callable[[Config], "Environment | Awaitable[Environment]"]


class SearchRequest(BaseModel):
    """Body of ``POST /v1/search``."""

    model_config = ConfigDict(extra="forbid")

    queries: list[str] = Field(min_length=1, description="Queries to run, answered in order.")
    top_k: int | None = Field(None, ge=1, le=50, description="Hits per query; default: the server's search.top_k.")


class BrowseRequest(BaseModel):
    """Body of ``POST /v1/browse``: the question, the URLs, and what the rollout has read so far."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, description="The research question the reader reads for.")
    urls: list[str] = Field(min_length=1, description="Pages to read, answered in order.")
    notes: list[str] = Field(default_factory=list, description="Notes the rollout already holds.")
    queries: list[str] = Field(default_factory=list, description="Searches the rollout made (context for the reader).")


_SEARCH_RESULTS = TypeAdapter(list[QueryResult])
_BROWSE_RESULTS = TypeAdapter(list[BrowseResult])
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class _HTTPProblem(Exception):
    """An answer other than 200, with the JSON error body the client reads."""

    def __init__(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.headers = status, kind, message, headers


def _check_batch_size(field: str, count: int, limit: int, setting: str) -> None:
    """Refuse a request whose ``field`` lists more than ``limit`` items, naming the setting (HTTP 422)."""
    if count > limit:
        raise _HTTPProblem(422, "validation", f"{field}: at most {limit} per request (serve.{setting}); split the batch.")



def _problem_for(exc: DeepResearcherError) -> _HTTPProblem:
    """Map a known error to a status: 4xx when retrying elsewhere cannot help, 5xx when it can."""
    if isinstance(exc, ReplayMissError):
        return _HTTPProblem(409, "replay_miss", str(exc))
    if isinstance(exc, (BackendError, PageError)):
        return _HTTPProblem(502, "upstream", str(exc))
    return _HTTPProblem(500, type(exc).__name__, str(exc))


def _validation_message(err: ValidationError) -> str:
    parts = []
    for problem in err.errors():
        where = ".".join(str(p) for p in problem["loc"]) or "body"
        parts.append(f"{where}: {problem['msg']}")
    return "; ".join(parts)


class _Gate:
    """Bounds requests handled at once; refuses (503) when too many already wait, so clients go elsewhere."""

    def __init__(self, limit: int, max_pending: int) -> None:
        self._sem = asyncio.Semaphore(limit)
        self.max_pending = max_pending
        self.in_flight = 0
        self.waiting = 0

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self._sem.locked():
            if self.waiting >= self.max_pending:
                raise _HTTPProblem(
                    503, "overloaded", f"{self.in_flight} requests in flight and {self.waiting} waiting; try another server.",
                    {"Retry-After": "1"},
                )
            self.waiting += 1
            try:
                await self._sem.acquire()
            finally:
                self.waiting -= 1
        else:
            await self._sem.acquire()
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1
            self._sem.release()


class _CacheCollector:
    """Exports the environment's record/replay cache counters, when it has one, at scrape time."""

    def __init__(self, app: FastAPI) -> None:
        self._app = app

    def collect(self) -> Iterator[Any]:
        cache = getattr(getattr(self._app.state, "env", None), "cache", None)
        stats = getattr(cache, "stats", None)
        if stats is None:
            return
        hits = CounterMetricFamily("deepresearcher_cache_hits", "Cache hits (all processes sharing the file).", labels=["kind", "backend"])
        misses = CounterMetricFamily("deepresearcher_cache_misses", "Cache misses (live calls).", labels=["kind", "backend"])
        entries = GaugeMetricFamily("deepresearcher_cache_entries", "Records in the cache.", labels=["kind", "backend"])
        for row in stats().rows:
            hits.add_metric([row.kind, row.backend], row.hits)
            misses.add_metric([row.kind, row.backend], row.misses)
            entries.add_metric([row.kind, row.backend], row.entries)
        yield from (hits, misses, entries)


class _Metrics:
    """The service's Prometheus metrics, in a registry of its own (several apps may share a process)."""

    def __init__(self, app: FastAPI) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("deepresearcher_handler_requests", "Requests answered.", ["route", "status"], registry=r)
        self.latency = Histogram(
            "deepresearcher_handler_request_seconds", "Time to answer a request.", ["route"],
            buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.errors = Counter("deepresearcher_handler_errors", "Requests answered with an error, by type.", ["route", "type"], registry=r)
        self.items = Counter("deepresearcher_handler_items", "Queries or URLs answered.", ["route"], registry=r)
        self.item_errors = Counter(
            "deepresearcher_handler_item_errors", "Queries or URLs answered with an error observation.", ["route"], registry=r
        )
        self.in_flight = Gauge("deepresearcher_handler_in_flight", "Requests being handled now.", registry=r)
        r.register(_CacheCollector(app))


def _bearer_token(config: Config) -> bytes | None:
    name = config.serve.auth_token_env
    if not name:
        return None
    token = os.environ.get(name, "")
    if not token:
        raise ConfigError(
            f"serve.auth_token_env names ${name}, but it is unset or empty; export a token there or unset serve.auth_token_env."
        )
    return token.encode()


_UNAUTHORIZED = "Missing or wrong bearer token (Authorization: Bearer <token>)."


def _authorized(token: bytes | None, authorization: bytes) -> bool:
    """Whether an ``Authorization`` header value carries ``token`` (always, when no token is required)."""
    return token is None or (authorization.startswith(b"Bearer ") and hmac.compare_digest(authorization[7:], token))


class BearerGuard:
    """An ASGI app behind the handler's bearer token (``serve.auth_token_env``), refused with the same 401 as
    ``/v1/*``: what is mounted beside the routes (``serve --mcp``'s ``/mcp``) must not be a way around the token."""

    def __init__(self, app: Any, config: Config) -> None:
        self.app = app
        self.token = _bearer_token(config)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        authorization = next((v for k, v in scope.get("headers", ()) if k == b"authorization"), b"")
        if _authorized(self.token, authorization):
            await self.app(scope, receive, send)
            return
        body = orjson.dumps({"error": {"type": "unauthorized", "message": _UNAUTHORIZED}})
        await _send_json(send, 401, body, {"WWW-Authenticate": "Bearer"})


def _default_factory(config: Config) -> Environment:
    from deepresearcher.web.environment import WebEnvironment  # heavy: indexes, readers

    env = WebEnvironment.from_config(config)
    started = time.perf_counter()
    if loaded := env.preload():
        logger.info("local index postings preloaded: %.0f MB in %.1f s", loaded / 1e6, time.perf_counter() - started)
    return env


class _Handler:
    """Answers the two batch routes: auth, validation, bounded concurrency, metrics, JSON out."""

    def __init__(self, config: Config, metrics: _Metrics) -> None:
        self.serve = config.serve
        self.default_top_k = config.search.top_k
        self.token = _bearer_token(config)
        self.metrics = metrics
        self.env: Environment | None = None
        self.gate: _Gate | None = None
        self.routes: dict[str, Callable[[bytes], Awaitable[bytes]]] = {
            "/v1/search": self._search,
            "/v1/browse": self._browse,
            "/retrieve": self._retrieve,
            "/access": self._access,
        }
        # Label lookups cost microseconds each; the hot ones are bound once.
        names = [path.rsplit("/", 1)[1] for path in self.routes]
        self._ok = {r: metrics.requests.labels(r, "200") for r in names}
        self._latency = {r: metrics.latency.labels(r) for r in names}
        self._items = {r: metrics.items.labels(r) for r in names}

    async def answer(self, path: str, authorization: bytes, body: bytes) -> tuple[int, bytes, dict[str, str] | None]:
        """``(status, JSON body, extra headers)`` for a POST to ``path``; never raises."""
        route = path.rsplit("/", 1)[1]
        start = time.perf_counter()
        problem: _HTTPProblem | None = None
        self.metrics.in_flight.inc()
        try:
            if not _authorized(self.token, authorization):
                raise _HTTPProblem(401, "unauthorized", _UNAUTHORIZED, {"WWW-Authenticate": "Bearer"})
            payload = await self.routes[path](body)
        except _HTTPProblem as exc:
            problem = exc
        except DeepResearcherError as exc:
            logger.warning("%s failed: %s", route, exc)
            problem = _problem_for(exc)
        except Exception as exc:  # a bug: answer 500 (the client fails over) and keep serving
            logger.exception("%s crashed", route)
            problem = _HTTPProblem(500, "internal", f"{type(exc).__name__}: {exc}")
        finally:
            self.metrics.in_flight.dec()
        if problem is None:
            self._ok[route].inc()
            self._latency[route].observe(time.perf_counter() - start)
            return 200, payload, None
        self.metrics.errors.labels(route, problem.kind).inc()
        self.metrics.requests.labels(route, str(problem.status)).inc()
        self._latency[route].observe(time.perf_counter() - start)
        return problem.status, orjson.dumps({"error": {"type": problem.kind, "message": problem.message}}), problem.headers

    @staticmethod
    def _parse(model: type[BaseModel], body: bytes) -> Any:
        try:
            return model.model_validate_json(body)
        except ValidationError as err:
            if any(p["type"] == "json_invalid" for p in err.errors()):
                raise _HTTPProblem(400, "invalid_json", "The request body is not valid JSON.") from None
            raise _HTTPProblem(422, "validation", _validation_message(err)) from None

    def _count_items(self, route: str, results: list[QueryResult] | list[BrowseResult]) -> None:
        self._items[route].inc(len(results))
        failed = sum(1 for r in results if r.error)
        if failed:
            self.metrics.item_errors.labels(route).inc(failed)

    async def _search(self, body: bytes) -> bytes:
        req: SearchRequest = self._parse(SearchRequest, body)
        _check_batch_size("queries", len(req.queries), self.serve.max_queries, "max_queries")
        assert self.env is not None and self.gate is not None, "the app's lifespan has not started"
        async with self.gate.slot():
            results = await self.env.search(req.queries, req.top_k)
        self._count_items("search", results)
        return b'{"results":' + _SEARCH_RESULTS.dump_json(results) + b"}"

    async def _browse(self, body: bytes) -> bytes:
        req: BrowseRequest = self._parse(BrowseRequest, body)
        _check_batch_size("urls", len(req.urls), self.serve.max_urls, "max_urls")
        assert self.env is not None and self.gate is not None, "the app's lifespan has not started"
        async with self.gate.slot():
            results = await self.env.browse(req.question, req.urls, notes=req.notes, queries=req.queries)
        self._count_items("browse", results)
        return b'{"results":' + _BROWSE_RESULTS.dump_json(results) + b"}"

    def _retrieval_source(self) -> RetrievalSource:
        assert self.env is not None and self.gate is not None, "the app's lifespan has not started"
        if not isinstance(self.env, RetrievalSource):
            raise _HTTPProblem(501, "unsupported", f"This handler's environment ({type(self.env).__name__}) cannot "
                               "answer the retriever API; serve an in-process environment (no env.server_urls).")
        return self.env

    async def _retrieve(self, body: bytes) -> bytes:
        req: RetrieveRequest = self._parse(RetrieveRequest, body)
        _check_batch_size("queries", len(req.queries), self.serve.max_retrieve_queries, "max_retrieve_queries")
        source = self._retrieval_source()
        async with self.gate.slot():  # type: ignore[union-attr]
            payload = await retrieval_api.retrieve(source, req, self.default_top_k)
        self._items["retrieve"].inc(len(req.queries))
        return payload

    async def _access(self, body: bytes) -> bytes:
        req: AccessRequest = self._parse(AccessRequest, body)
        _check_batch_size("urls", len(req.urls), self.serve.max_urls, "max_urls")
        source = self._retrieval_source()
        async with self.gate.slot():  # type: ignore[union-attr]
            payload, unread = await retrieval_api.access(source, req)
        self._items["access"].inc(len(req.urls))
        if unread:
            self.metrics.item_errors.labels("access").inc(unread)
        return payload


class _BatchRoutes:
    """ASGI middleware that answers the POST routes (``/v1/search``, ``/v1/browse``, ``/retrieve``, ``/access``) itself.

    Why not FastAPI routes: on a cached search the request/response objects, routing and dependency
    machinery cost more CPU than the search; answering here keeps the service near its HTTP parser's
    speed. Validation is still the pydantic models above. Every other path goes to the FastAPI app.
    """

    def __init__(self, app: Any, handler: _Handler) -> None:
        self.app = app
        self.handler = handler

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] not in self.handler.routes:
            await self.app(scope, receive, send)
            return
        if scope["method"] != "POST":
            await _send_json(send, 405, orjson.dumps({"error": {"type": "method", "message": "Use POST."}}), {"Allow": "POST"})
            return
        authorization = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value
        limit = self.handler.serve.max_body_bytes
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                text = f"The request body is over {limit} bytes (serve.max_body_bytes); split the batch."
                await _send_json(send, 413, orjson.dumps({"error": {"type": "too_large", "message": text}}), None)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        status, payload, headers = await self.handler.answer(scope["path"], authorization, b"".join(chunks))
        await _send_json(send, status, payload, headers)


async def _send_json(send: Any, status: int, payload: bytes, headers: dict[str, str] | None) -> None:
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})


def create_app(config: Config, environment_factory: EnvironmentFactory | None = None) -> FastAPI:
    """The handler app. The environment is built by ``environment_factory(config)`` (default:
    ``WebEnvironment.from_config``) when the app starts, and closed when it stops."""
    factory = environment_factory or _default_factory
    serve = config.serve

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        env = factory(config)
        if inspect.isawaitable(env):
            env = await env
        app.state.env = handler.env = env
        app.state.gate = handler.gate = _Gate(serve.max_concurrency, serve.max_pending)
        logger.info("handler environment ready: %s", type(env).__name__)
        try:
            yield
        finally:
            await env.aclose()
            logger.info("handler environment closed")

    app = FastAPI(
        title="deepresearcher handler", version="1", lifespan=lifespan, docs_url=None, redoc_url=None,
        # FastAPI's OpenTelemetry hooks check global providers on every request; /metrics covers us.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    metrics = _Metrics(app)
    handler = _Handler(config, metrics)
    app.add_middleware(_BatchRoutes, handler=handler)

    @app.get("/healthz", summary="Liveness and load")
    async def healthz() -> Response:
        gate: _Gate = app.state.gate
        body = orjson.dumps({"status": "ok", "in_flight": gate.in_flight, "waiting": gate.waiting})
        return Response(content=body, media_type="application/json")

    @app.get("/metrics", summary="Prometheus metrics")
    async def prometheus() -> Response:
        data = await asyncio.to_thread(generate_latest, metrics.registry)  # the cache collector reads SQLite
        return Response(content=data, media_type=CONTENT_TYPE_LATEST)

    return app


def bind_socket(host: str, port: int) -> socket.socket:
    """Listen on ``host:port`` (port 0 picks a free one) before serving, so the real port is known up front."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:
        raise ConfigError(f"Cannot listen on {host}:{port} ({exc}); pick another --port or --host.") from None


def run_server(
    config: Config,
    host: str | None = None,
    port: int | None = None,
    on_listening: Callable[[str], None] | None = None,
    extend: Callable[[FastAPI], None] | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM; then in-flight requests finish (up to ``serve.graceful_timeout_s``)
    and the environment closes, flushing its cache. uvloop and httptools are used when installed.
    ``extend(app)`` adds to the app before it serves (``serve --mcp`` mounts the MCP endpoint there)."""
    import uvicorn

    sock = bind_socket(host or config.serve.host, config.serve.port if port is None else port)
    bound_host, bound_port = sock.getsockname()[:2]
    try:
        # Built before uvicorn starts: a handler that cannot start (a missing API key, no index) stops
        # with the one-line error every command prints, not a traceback from the ASGI lifespan.
        environment = _default_factory(config)
    except BaseException:
        sock.close()
        raise
    app = create_app(config, lambda _config: environment)
    if extend is not None:
        extend(app)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            loop="auto",
            http="auto",
            lifespan="on",
            access_log=False,
            log_level=logging.getLevelName(logging.getLogger().getEffectiveLevel()).lower(),
            timeout_graceful_shutdown=config.serve.graceful_timeout_s,
        )
    )
    url = f"http://{'[' + bound_host + ']' if ':' in bound_host else bound_host}:{bound_port}"
    if on_listening is not None:
        on_listening(url)
    server.run(sockets=[sock])
