"""Slow tools: an ``Environment`` that waits a drawn delay before each search and browse call.

On the live web one tool call takes under a second to a minute (a page fetch plus a reader model); the
local index answers in milliseconds. ``LatencyEnvironment`` puts the web's waits back, so synchronous and
asynchronous training can be compared on a machine without the internet (``env.latency``).

Each delay is a pure function of (seed, call kind, call content, how often that content was called
before), not a draw from a shared random stream: the delay a call gets does not depend on which other
calls happened to run first, so a synchronous and an asynchronous run of the same calls wait the same
delays. (Two concurrent calls with identical content share their two draws between them in scheduling
order; the set of delays is the same.)

The waits are ``asyncio.sleep``: concurrent calls overlap, as requests to the web do. The wrapper can
also record each call's measured wall time to a file, which the ``replay`` distribution draws from.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections import Counter
from pathlib import Path
from statistics import NormalDist
from typing import IO, Literal

import orjson

from deepresearcher.config import LatencyConfig
from deepresearcher.errors import ConfigError
from deepresearcher.web.interface import Environment
from deepresearcher.web.types import BrowseResult, QueryResult

Kind = Literal["search", "browse"]
KINDS: tuple[Kind, ...] = ("search", "browse")

Z_99 = NormalDist().inv_cdf(0.99)
"""The standard normal's 99th percentile (2.3263): a lognormal's p99 is its median times exp(sigma * Z_99)."""


def uniform(seed: int, kind: str, content: str, occurrence: int) -> float:
    """A number in (0, 1), uniform over keys and fixed by the key: the randomness of one call's delay."""
    key = orjson.dumps([seed, kind, content, occurrence])
    word = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") >> 11  # 53 bits: exact in a float
    return (word + 0.5) / 2**53


def lognormal_delay(u: float, median_s: float, p99_s: float) -> float:
    """The ``u`` quantile of the lognormal with this median and 99th percentile."""
    sigma = math.log(p99_s / median_s) / Z_99
    return median_s * math.exp(sigma * NormalDist().inv_cdf(u))


def read_latencies(path: Path) -> dict[Kind | None, list[float]]:
    """Recorded latencies by kind (``None``: lines that name no kind), in file order.

    A line is ``{"kind": "search"|"browse", "seconds": x}`` or a bare number of seconds; blank lines are skipped.
    """
    if not path.is_file():
        raise ConfigError(f"env.latency.replay_file {path} does not exist; record one with env.latency.record_file")
    records: dict[Kind | None, list[float]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
            kind, seconds = (value.get("kind"), value["seconds"]) if isinstance(value, dict) else (None, value)
            seconds = float(seconds)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            raise ConfigError(f"{path}:{number}: expected a number of seconds or "
                              f'{{"kind": "search"|"browse", "seconds": x}}, got {line[:80]!r}') from None
        if kind not in (*KINDS, None) or not math.isfinite(seconds) or seconds < 0:
            raise ConfigError(f"{path}:{number}: kind must be search or browse and seconds a finite number >= 0, "
                              f"got {line[:80]!r}")
        records.setdefault(kind, []).append(seconds)
    if not records:
        raise ConfigError(f"env.latency.replay_file {path} holds no latencies")
    return records


class DelayModel:
    """Draws the delay of one call from ``env.latency``'s distribution, deterministically; sleeps nothing."""

    def __init__(self, config: LatencyConfig) -> None:
        self.config = config
        self.recorded: dict[Kind | None, list[float]] = {}
        if config.distribution == "replay" and config.replay_file is not None:
            self.recorded = read_latencies(config.replay_file)

    def delay(self, kind: Kind, content: str, occurrence: int) -> float:
        """Seconds the ``occurrence``-th call (from 0) of ``kind`` with this ``content`` waits."""
        cfg = self.config
        if cfg.distribution == "none":
            return 0.0
        u = uniform(cfg.seed, kind, content, occurrence)
        if cfg.distribution == "lognormal":
            scale = cfg.browse_scale if kind == "browse" else 1.0
            return scale * lognormal_delay(u, cfg.median_s, cfg.p99_s)
        pool = self.recorded.get(kind) or [s for values in self.recorded.values() for s in values]
        return pool[int(u * len(pool))]


class LatencyEnvironment:
    """``inner`` behind simulated tool latency (and, with ``record_file``, a recorder of its real latency).

    Counters for reports: ``calls`` and ``slept_s`` (the added delay) per kind; ``summary()`` gives them as JSON.
    """

    def __init__(self, inner: Environment, config: LatencyConfig) -> None:
        self.inner = inner
        self.model = DelayModel(config)
        # How often each (kind, content) was called, by a 16-byte digest: a long run makes millions of calls.
        self.seen: Counter[bytes] = Counter()
        self.calls: dict[Kind, int] = dict.fromkeys(KINDS, 0)
        self.slept_s: dict[Kind, float] = dict.fromkeys(KINDS, 0.0)
        self._record: IO[bytes] | None = None
        if config.record_file is not None:
            config.record_file.parent.mkdir(parents=True, exist_ok=True)
            self._record = config.record_file.open("ab")

    async def _wait(self, kind: Kind, content: str) -> None:
        key = hashlib.blake2b(orjson.dumps([kind, content]), digest_size=16).digest()
        occurrence = self.seen[key]
        self.seen[key] += 1
        delay = self.model.delay(kind, content, occurrence)
        self.calls[kind] += 1
        self.slept_s[kind] += delay
        if delay > 0:
            await asyncio.sleep(delay)

    def _record_latency(self, kind: Kind, started: float) -> None:
        if self._record is not None:
            self._record.write(orjson.dumps({"kind": kind, "seconds": round(time.perf_counter() - started, 6)}) + b"\n")
            self._record.flush()

    async def search(self, queries: list[str], top_k: int | None = None) -> list[QueryResult]:
        await self._wait("search", orjson.dumps([queries, top_k]).decode())
        started = time.perf_counter()
        results = await self.inner.search(queries, top_k)
        self._record_latency("search", started)
        return results

    async def browse(
        self, question: str, urls: list[str], notes: list[str] | None = None, queries: list[str] | None = None
    ) -> list[BrowseResult]:
        # Keyed on what the reader's work depends on: the question and the pages (not the rollout's notes).
        await self._wait("browse", orjson.dumps([question, urls]).decode())
        started = time.perf_counter()
        results = await self.inner.browse(question, urls, notes=notes, queries=queries)
        self._record_latency("browse", started)
        return results

    def summary(self) -> dict[str, float | int]:
        """The counters as one flat JSON-ready dict, for benchmarks and logs."""
        out: dict[str, float | int] = {}
        for kind in KINDS:
            out[f"{kind}_calls"] = self.calls[kind]
            out[f"{kind}_slept_s"] = round(self.slept_s[kind], 6)
        return out

    async def aclose(self) -> None:
        if self._record is not None:
            self._record.close()
            self._record = None
        await self.inner.aclose()

    async def __aenter__(self) -> LatencyEnvironment:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
