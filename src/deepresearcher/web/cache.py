"""Record/replay store for every search, fetch and reader call, on one SQLite file (WAL).

Why: live search costs money and drifts over time. Recording every answer makes a rerun free and a
replayed rollout identical to the recorded one.

A record is keyed by ``(kind, backend, normalized request, parameters)``, hashed; it keeps the response
(JSON), when it was created and where it came from. Three modes:

- ``off``: the cache is bypassed; every call is live and nothing is written.
- ``readwrite``: a fresh record is served; a miss (or an expired record) calls live and records the answer.
- ``replay``: only records are served (TTL ignored, so an old recording replays as it was); a miss raises
  :class:`~deepresearcher.errors.ReplayMissError` and no live call is made.

Concurrency: reads are single indexed lookups done inline (WAL readers never wait for writers, and a
lookup costs tens of microseconds, less than a thread hop). Writes go to one writer thread per process
that commits whatever is queued in one transaction; ``put`` returns only after its record is committed,
so a process killed afterwards loses nothing it answered. Many processes may write the same file: SQLite
serializes them with a busy timeout.

Example::

    cache = WebCache("web-cache.sqlite", mode="readwrite", prices={"serper": 0.001})
    hits = await cached(cache, "search", "serper", "Who wrote Dune?", {"top_k": 10},
                        lambda: backend.search("Who wrote Dune?", 10))
    cache.stats().money_saved
    await cache.aclose()
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import queue
import re
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit, urlunsplit

import orjson

from deepresearcher.errors import ConfigError, DataError, ReplayMissError

if TYPE_CHECKING:
    from deepresearcher.config import CacheConfig

logger = logging.getLogger(__name__)

CacheMode = Literal["off", "readwrite", "replay"]
MODES: tuple[str, ...] = ("off", "readwrite", "replay")

# Seconds a record of each kind stays fresh in readwrite mode; None = forever.
DEFAULT_TTL_S: dict[str, float | None] = {"search": 30 * 86400.0, "fetch": 30 * 86400.0, "reader": None}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    key        TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,
    backend    TEXT NOT NULL,
    request    TEXT NOT NULL,
    params     TEXT NOT NULL,
    response   BLOB NOT NULL,
    created_at REAL NOT NULL,
    source     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS records_kind_created ON records (kind, created_at);
CREATE TABLE IF NOT EXISTS counters (
    kind    TEXT NOT NULL,
    backend TEXT NOT NULL,
    hits    INTEGER NOT NULL DEFAULT 0,
    misses  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (kind, backend)
);
"""

_UPSERT = """
INSERT INTO records (key, kind, backend, request, params, response, created_at, source)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(key) DO UPDATE SET
    response = excluded.response, created_at = excluded.created_at, source = excluded.source
WHERE excluded.created_at >= records.created_at
"""

_COUNT = """
INSERT INTO counters (kind, backend, hits, misses) VALUES (?, ?, ?, ?)
ON CONFLICT(kind, backend) DO UPDATE SET hits = hits + excluded.hits, misses = misses + excluded.misses
"""

_WS = re.compile(r"\s+")
_COUNTER_FLUSH_S = 5.0


def normalize_text(text: str) -> str:
    """Collapse whitespace and case, so ``"  Who wrote  DUNE?"`` and ``"who wrote dune?"`` share a record."""
    return _WS.sub(" ", text).strip().casefold()


def normalize_url(url: str) -> str:
    """Lower-case scheme and host, drop the fragment: the parts that never change what a server returns."""
    url = url.strip()
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path or "/", parts.query, ""))


def normalize_request(kind: str, request: Any) -> Any:
    """The canonical form of a request: search queries fold case and spaces, fetch URLs their host.

    Anything else (a reader's ``{question, url, ...}``) keeps its case but has its strings' whitespace
    collapsed, since a reader's answer may depend on the exact wording.
    """
    if isinstance(request, str):
        if kind == "search":
            return normalize_text(request)
        if kind == "fetch":
            return normalize_url(request)
        return _WS.sub(" ", request).strip()
    if isinstance(request, dict):
        return {str(k): normalize_request(kind, v) for k, v in request.items()}
    if isinstance(request, (list, tuple)):
        return [normalize_request(kind, v) for v in request]
    return request


def _dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except TypeError as exc:
        raise TypeError(
            f"Cache values must be JSON-serializable ({exc}); pass encode=/decode= to cached() for pydantic objects."
        ) from exc


def make_key(kind: str, backend: str, request: Any, params: dict[str, Any] | None) -> tuple[str, str, str]:
    """Return ``(key, request_json, params_json)`` for a call; the key is a SHA-256 of all four parts."""
    request_json = _dumps(normalize_request(kind, request)).decode()
    params_json = _dumps(params or {}).decode()
    digest = hashlib.sha256(f"{kind}\x1f{backend}\x1f{request_json}\x1f{params_json}".encode()).hexdigest()
    return digest, request_json, params_json


@dataclass
class BackendStats:
    """Counters of one (kind, backend) pair."""

    kind: str
    backend: str
    entries: int = 0
    hits: int = 0
    misses: int = 0
    price_per_call: float = 0.0

    @property
    def calls_saved(self) -> int:
        """Every hit is a live call that was not made."""
        return self.hits

    @property
    def money_saved(self) -> float:
        return self.hits * self.price_per_call


@dataclass
class CacheStats:
    """What the cache holds and what it saved, summed over every process that used the file."""

    path: str
    size_bytes: int
    rows: list[BackendStats] = field(default_factory=list)

    @property
    def entries(self) -> int:
        return sum(r.entries for r in self.rows)

    @property
    def hits(self) -> int:
        return sum(r.hits for r in self.rows)

    @property
    def misses(self) -> int:
        return sum(r.misses for r in self.rows)

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    @property
    def calls_saved(self) -> int:
        return self.hits

    @property
    def money_saved(self) -> float:
        return sum(r.money_saved for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary, as printed by ``deepresearcher cache stats --json``."""
        return {
            "path": self.path,
            "size_bytes": self.size_bytes,
            "entries": self.entries,
            "hits": self.hits,
            "misses": self.misses,
            "hit_rate": round(self.hit_rate, 4),
            "calls_saved": self.calls_saved,
            "money_saved": round(self.money_saved, 6),
            "by_backend": [
                {
                    "kind": r.kind,
                    "backend": r.backend,
                    "entries": r.entries,
                    "hits": r.hits,
                    "misses": r.misses,
                    "calls_saved": r.calls_saved,
                    "money_saved": round(r.money_saved, 6),
                }
                for r in self.rows
            ],
        }


@dataclass
class _Write:
    row: tuple[Any, ...] | None  # None: a barrier that only reports when everything before it is committed
    done: Callable[[BaseException | None], None]


class WebCache:
    """A record/replay store on one SQLite file; safe to share between tasks, threads and processes.

    Build one per process (it owns a writer thread) and close it with ``aclose``/``close`` or ``async with``.
    """

    def __init__(
        self,
        path: str | Path,
        mode: CacheMode = "readwrite",
        ttl_s: dict[str, float | None] | None = None,
        prices: dict[str, float] | None = None,
        busy_timeout_s: float = 60.0,
    ) -> None:
        if mode not in MODES:
            raise ConfigError(f"Cache mode {mode!r} is unknown; use one of {', '.join(MODES)} (cache.mode).")
        self.path = Path(path)
        self.mode: CacheMode = mode
        self.ttl_s = {**DEFAULT_TTL_S, **(ttl_s or {})}
        self.prices = dict(prices or {})
        self._busy_ms = int(busy_timeout_s * 1000)
        self._local = threading.local()
        self._counts: dict[tuple[str, str], list[int]] = {}
        self._counts_lock = threading.Lock()
        self._inflight: dict[str, asyncio.Future[Any]] = {}
        self._queue: queue.SimpleQueue[_Write | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._writer_lock = threading.Lock()
        self._closed = False
        if mode == "replay" and not self.path.is_file():
            raise ConfigError(
                f"Replay cache {self.path} does not exist; record it first with cache.mode=readwrite "
                "(or set cache.path to an existing recording)."
            )
        if mode != "off":
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as conn:
                conn.executescript(_SCHEMA)

    @staticmethod
    def config_path(cache: CacheConfig, cache_dir: Path) -> Path:
        """The file a ``CacheConfig`` names: its ``path``, or ``<cache_dir>/web-cache.sqlite``."""
        return Path(cache.path) if cache.path else Path(cache_dir) / "web-cache.sqlite"

    @classmethod
    def from_config(cls, cache: CacheConfig, cache_dir: Path, mode: CacheMode | None = None) -> WebCache:
        """Build from a ``CacheConfig`` (``cache_dir`` is ``Config.resolved_cache_dir()``); ``mode`` overrides it."""
        return cls(
            cls.config_path(cache, cache_dir), mode=mode or cache.mode, ttl_s=cache.ttl_s, prices=cache.price_per_call
        )

    # ------------------------------------------------------------------ connections

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=self._busy_ms / 1000, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout={self._busy_ms}")
        conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL: a commit survives a killed process (not a power cut) without an fsync per write.
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def _reader(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            conn = self._connect()
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    # ------------------------------------------------------------------ reads

    def lookup(self, kind: str, backend: str, request: Any, params: dict[str, Any] | None = None) -> Any | None:
        """The recorded response, or None on a miss (or an expired record outside replay). Counts the hit/miss."""
        if self.mode == "off":
            return None
        key, _, _ = make_key(kind, backend, request, params)
        found = self._get_key(kind, key)
        self._count(kind, backend, hit=found is not None)
        return found[0] if found is not None else None

    def _get_key(self, kind: str, key: str) -> tuple[Any] | None:
        row = self._reader().execute("SELECT response, created_at FROM records WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        ttl = self.ttl_s.get(kind)
        if self.mode != "replay" and ttl is not None and time.time() - row[1] > ttl:
            return None
        return (orjson.loads(row[0]),)

    def _count(self, kind: str, backend: str, *, hit: bool) -> None:
        with self._counts_lock:
            slot = self._counts.setdefault((kind, backend), [0, 0])
            slot[0 if hit else 1] += 1

    # ------------------------------------------------------------------ writes

    async def put(
        self, kind: str, backend: str, request: Any, params: dict[str, Any] | None, response: Any, source: str = "live"
    ) -> None:
        """Record a response; returns once it is committed. Does nothing unless the mode is ``readwrite``."""
        if self.mode != "readwrite":
            return
        row = self._row(kind, backend, request, params, response, source)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        def done(exc: BaseException | None) -> None:
            try:
                loop.call_soon_threadsafe(_settle, fut, exc)
            except RuntimeError:  # the caller's loop closed meanwhile; the record is committed anyway
                pass

        self._submit(_Write(row, done))
        await fut

    def put_sync(
        self, kind: str, backend: str, request: Any, params: dict[str, Any] | None, response: Any, source: str = "live"
    ) -> None:
        """Blocking ``put`` for synchronous callers (threads, scripts)."""
        if self.mode != "readwrite":
            return
        event = threading.Event()
        error: list[BaseException | None] = [None]

        def done(exc: BaseException | None) -> None:
            error[0] = exc
            event.set()

        self._submit(_Write(self._row(kind, backend, request, params, response, source), done))
        event.wait()
        if error[0] is not None:
            raise error[0]

    def _row(
        self, kind: str, backend: str, request: Any, params: dict[str, Any] | None, response: Any, source: str
    ) -> tuple[Any, ...]:
        key, request_json, params_json = make_key(kind, backend, request, params)
        return (key, kind, backend, request_json, params_json, _dumps(response), time.time(), source)

    def _submit(self, item: _Write) -> None:
        if self._closed:
            raise RuntimeError("WebCache is closed; build a new one to record more.")
        with self._writer_lock:
            if self._writer is None or not self._writer.is_alive():
                self._writer = threading.Thread(target=self._write_loop, name="webcache-writer", daemon=True)
                self._writer.start()
        self._queue.put(item)

    def _write_loop(self) -> None:
        conn = self._connect()
        stop = False
        try:
            while not stop:
                try:
                    first = self._queue.get(timeout=_COUNTER_FLUSH_S)
                except queue.Empty:
                    self._flush_counts(conn)
                    continue
                batch: list[_Write] = []
                for item in self._drain(first):
                    if item is None:
                        stop = True
                    else:
                        batch.append(item)
                self._commit(conn, batch)
        finally:
            self._flush_counts(conn)
            conn.close()

    def _drain(self, first: _Write | None) -> Iterator[_Write | None]:
        yield first
        for _ in range(1024):
            try:
                yield self._queue.get_nowait()
            except queue.Empty:
                return

    def _commit(self, conn: sqlite3.Connection, batch: list[_Write]) -> None:
        rows = [w.row for w in batch if w.row is not None]
        error: BaseException | None = None
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(_UPSERT, rows)
            self._write_counts(conn)
            conn.execute("COMMIT")
        except BaseException as exc:  # noqa: BLE001 - handed to every waiting caller
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            error = exc
            logger.warning("cache write of %d record(s) failed: %s", len(rows), exc)
        for write in batch:
            write.done(error)

    def _write_counts(self, conn: sqlite3.Connection) -> None:
        with self._counts_lock:
            counts, self._counts = self._counts, {}
        if counts:
            conn.executemany(_COUNT, [(k, b, h, m) for (k, b), (h, m) in counts.items()])

    def _flush_counts(self, conn: sqlite3.Connection) -> None:
        if not self._counts or self.mode == "off":
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
            self._write_counts(conn)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            logger.warning("cache counters not saved: %s", exc)

    # ------------------------------------------------------------------ the one-line wrapper

    async def cached(
        self,
        kind: str,
        backend: str,
        request: Any,
        params: dict[str, Any] | None,
        compute: Callable[[], Awaitable[Any]],
        *,
        encode: Callable[[Any], Any] | None = None,
        decode: Callable[[Any], Any] | None = None,
        source: str = "live",
    ) -> Any:
        """Serve ``request`` from the cache, or await ``compute()`` and record its result.

        ``encode`` turns the live result into JSON data for storage and ``decode`` turns stored data back
        (e.g. ``[h.model_dump() for h in hits]`` / ``[SearchHit(**d) for d in data]``); both default to
        identity. Identical requests in flight in this process share one live call.
        """
        if self.mode == "off":
            return await compute()
        key, _, _ = make_key(kind, backend, request, params)
        found = self._get_key(kind, key)
        if found is not None:
            self._count(kind, backend, hit=True)
            return decode(found[0]) if decode else found[0]
        if self.mode == "replay":
            self._count(kind, backend, hit=False)
            raise ReplayMissError(
                f"Replay cache {self.path} has no {kind} record from backend {backend!r} for request "
                f"{_short(request)} with parameters {params or {}}; run once with cache.mode=readwrite "
                "to record it (or import a recording with `deepresearcher cache import`)."
            )
        pending = self._inflight.get(key)
        if pending is not None:
            self._count(kind, backend, hit=True)
            try:
                data = await asyncio.shield(pending)
            except asyncio.CancelledError:
                if not pending.cancelled():
                    raise  # this caller was cancelled
                # The caller doing the live call was cancelled: make it ourselves.
                return await self.cached(
                    kind, backend, request, params, compute, encode=encode, decode=decode, source=source
                )
            return decode(data) if decode else data
        self._count(kind, backend, hit=False)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            result = await compute()
            data = encode(result) if encode else result
            try:
                await self.put(kind, backend, request, params, data, source=source)
            except sqlite3.Error as exc:  # the answer is good; a locked or full disk must not fail the call
                logger.warning("%s answer from %s not recorded: %s", kind, backend, exc)
            fut.set_result(data)
            return result
        except asyncio.CancelledError:
            fut.cancel()
            raise
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # mark retrieved: waiters re-raise it, nobody else must
            raise
        finally:
            del self._inflight[key]

    # ------------------------------------------------------------------ maintenance

    def stats(self) -> CacheStats:
        """Entries, hits, misses, calls and money saved per (kind, backend), read from the file.

        Blocks while pending writes commit; from async code call it through ``asyncio.to_thread``.
        """
        if self.mode == "off" and not self.path.exists():
            return CacheStats(str(self.path), 0)
        self.flush()
        conn = self._reader()
        rows: dict[tuple[str, str], BackendStats] = {}
        for kind, backend, n in conn.execute("SELECT kind, backend, COUNT(*) FROM records GROUP BY kind, backend"):
            rows[(kind, backend)] = BackendStats(kind, backend, entries=n)
        for kind, backend, hits, misses in conn.execute("SELECT kind, backend, hits, misses FROM counters"):
            row = rows.setdefault((kind, backend), BackendStats(kind, backend))
            row.hits, row.misses = hits, misses
        for row in rows.values():
            row.price_per_call = self.prices.get(row.backend, 0.0)
        size = sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*") if p.is_file())
        return CacheStats(str(self.path), size, sorted(rows.values(), key=lambda r: (r.kind, r.backend)))

    def flush(self) -> None:
        """Block until every queued record and this process's hit/miss counters are committed."""
        if self.mode == "off" or self._closed:
            return
        if self._writer is not None and self._writer.is_alive():
            event = threading.Event()
            self._queue.put(_Write(None, lambda exc: event.set()))
            event.wait()
        conn = self._reader()
        self._flush_counts(conn)

    def export_jsonl(self, path: str | Path, kind: str | None = None) -> int:
        """Write every record (or one kind's) as JSON lines; returns how many were written."""
        self.flush()
        query = "SELECT key, kind, backend, request, params, response, created_at, source FROM records"
        args: tuple[Any, ...] = ()
        if kind:
            query, args = query + " WHERE kind = ?", (kind,)
        n = 0
        with open(path, "wb") as out:
            for key, k, backend, request, params, response, created_at, source in self._reader().execute(query, args):
                line = {
                    "key": key,
                    "kind": k,
                    "backend": backend,
                    "request": orjson.loads(request),
                    "params": orjson.loads(params),
                    "response": orjson.loads(response),
                    "created_at": created_at,
                    "source": source,
                }
                out.write(orjson.dumps(line) + b"\n")
                n += 1
        return n

    def import_jsonl(self, path: str | Path) -> int:
        """Load records written by ``export_jsonl``; a newer record already here is kept. Returns lines read."""
        if self.mode == "off":
            raise ConfigError("Cannot import into a cache in mode 'off'; set cache.mode=readwrite.")
        rows = []
        with open(path, "rb") as src:
            for lineno, line in enumerate(src, 1):
                if not line.strip():
                    continue
                try:
                    rec = orjson.loads(line)
                    kind, backend = rec["kind"], rec["backend"]
                    key, request_json, params_json = make_key(kind, backend, rec["request"], rec["params"])
                    rows.append(
                        (key, rec["kind"], rec["backend"], request_json, params_json, _dumps(rec["response"]),
                         float(rec["created_at"]), str(rec.get("source", "import")))
                    )
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                    raise DataError(f"{path}:{lineno}: not a cache export record ({exc}).") from exc
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(_UPSERT, rows)
            conn.execute("COMMIT")
        finally:
            conn.close()
        return len(rows)

    def prune(self, *, expired: bool = True, older_than_s: float | None = None) -> int:
        """Delete records past their kind's TTL and/or older than ``older_than_s``; returns how many."""
        self.flush()
        now = time.time()
        deleted = 0
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            if expired:
                for kind, ttl in self.ttl_s.items():
                    if ttl is not None:
                        deleted += conn.execute(
                            "DELETE FROM records WHERE kind = ? AND created_at < ?", (kind, now - ttl)
                        ).rowcount
            if older_than_s is not None:
                deleted += conn.execute("DELETE FROM records WHERE created_at < ?", (now - older_than_s,)).rowcount
            conn.execute("COMMIT")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        return deleted

    def close(self) -> None:
        """Commit everything queued, stop the writer thread and close connections."""
        if self._closed:
            return
        if self._writer is not None and self._writer.is_alive():
            self._queue.put(None)
            self._writer.join()
        elif self.mode != "off":
            self._flush_counts(self._reader())
        self._closed = True
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    async def aclose(self) -> None:
        """``close`` off the event loop (it waits for the last commit)."""
        await asyncio.to_thread(self.close)

    async def __aenter__(self) -> WebCache:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __enter__(self) -> WebCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _settle(fut: asyncio.Future[None], exc: BaseException | None) -> None:
    if fut.done():
        return
    if exc is None:
        fut.set_result(None)
    else:
        fut.set_exception(exc)


def _short(request: Any, limit: int = 200) -> str:
    text = repr(request)
    return text if len(text) <= limit else text[:limit] + "...'"


async def cached(
    cache: WebCache | None,
    kind: str,
    backend: str,
    request: Any,
    params: dict[str, Any] | None,
    compute: Callable[[], Awaitable[Any]],
    *,
    encode: Callable[[Any], Any] | None = None,
    decode: Callable[[Any], Any] | None = None,
    source: str = "live",
) -> Any:
    """Wrap one live call in the cache in one line; with ``cache=None`` it just awaits ``compute()``.

    Example::

        page = await cached(cache, "fetch", "http", url, {"extractor": fetcher.extractor}, lambda: fetcher.fetch(url),
                            encode=Page.model_dump, decode=Page.model_validate)
    """
    if cache is None:
        return await compute()
    return await cache.cached(kind, backend, request, params, compute, encode=encode, decode=decode, source=source)
