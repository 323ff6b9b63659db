"""Handler service benchmark: requests/s and p50/p99 latency for cached search and for browse.

Everything runs on loopback: the synthetic world's pages on a website, a Serper emulator indexing
them, and ``deepresearcher serve`` in its own process (uvloop + httptools when installed) with the
record/replay cache. The load generator is an aiohttp client holding ``--concurrency`` requests in
flight.

Measured:

* ``search_cached``: every query was recorded first, so no request reaches the search API (checked);
* ``browse_cold``: each request reads one page never fetched before (live fetch + extraction + reader);
* ``browse_cached``: the same pages again (fetch served by the cache; extraction and reader still run);
* ``overhead_ms``: service latency at concurrency 1 minus the in-process environment's latency on the
  same cached request — the cost of HTTP, validation and serialization per request — and, since wall
  time on a busy machine is mostly waiting for a core, the same difference in CPU time
  (``*_server_cpu``: the server's CPU per request minus the in-process environment's).

    deepresearcher bench env --json
    deepresearcher bench env --seconds 10 --concurrency 64 --world-size small
    deepresearcher bench env --json --extractor resiliparse   # cold browse with the other HTML extractor

Target (issue 3): >= 3,000 cached search requests/s on 2 cores; overhead under 1 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

from deepresearcher.config import Config
from deepresearcher.testing.handlers import HandlerProcess
from deepresearcher.testing.loopback_web import LoopbackWeb
from deepresearcher.web.environment import WebEnvironment
from deepresearcher.world import build_world


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a process has used (Linux /proc), to report cost per request on a busy machine."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _summary(latencies: list[float], wall: float, errors: int) -> dict[str, Any]:
    latencies = sorted(latencies)
    return {
        "requests": len(latencies),
        "errors": errors,
        "requests_per_second": round(len(latencies) / wall, 1) if wall else 0.0,
        "latency_ms_p50": round(statistics.median(latencies) * 1000, 3) if latencies else None,
        "latency_ms_p99": round(latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000, 3) if latencies else None,
    }


async def _load(
    url: str, bodies: list[bytes], concurrency: int, seconds: float | None, server_pid: int | None = None
) -> dict[str, Any]:
    """Send ``bodies`` (cycled until ``seconds`` pass, or once if None) with ``concurrency`` in flight.

    With ``server_pid``, also report the server's and this client's CPU milliseconds per request: on a
    machine shared with other work, that is the capacity measure that does not depend on the neighbours.
    """
    server_cpu = _cpu_seconds(server_pid) if server_pid else None
    client_cpu = time.process_time()
    latencies: list[float] = []
    errors = 0
    position = 0
    stop_at = None if seconds is None else time.perf_counter() + seconds
    connector = aiohttp.TCPConnector(limit=concurrency)
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:

        async def worker() -> None:
            nonlocal position, errors
            while True:
                if stop_at is None:
                    if position >= len(bodies):
                        return
                elif time.perf_counter() >= stop_at:
                    return
                body = bodies[position % len(bodies)]
                position += 1
                t0 = time.perf_counter()
                async with session.post(url, data=body) as resp:
                    await resp.read()
                    ok = resp.status == 200
                latencies.append(time.perf_counter() - t0)
                errors += not ok

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - started
    summary = _summary(latencies, wall, errors)
    if server_cpu is not None and latencies:
        used = (_cpu_seconds(server_pid) or 0.0) - server_cpu  # type: ignore[arg-type]
        summary["server_cpu_ms_per_request"] = round(used * 1000 / len(latencies), 3)
        summary["server_capacity_rps_per_core"] = round(len(latencies) / used, 1) if used else None
        summary["client_cpu_ms_per_request"] = round((time.process_time() - client_cpu) * 1000 / len(latencies), 3)
    return summary


async def _in_process_cost(env: WebEnvironment, calls: list[tuple[str, Any]]) -> tuple[float, float]:
    """``(median wall seconds, mean CPU seconds)`` of the environment's own search/browse on the same
    (cached) requests: the "upstream" time the service adds its overhead to."""
    samples = []
    cpu_start = time.process_time()
    for kind, args in calls:
        t0 = time.perf_counter()
        if kind == "search":
            await env.search(*args)
        else:
            await env.browse(*args)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples), (time.process_time() - cpu_start) / len(calls)


def main(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="deepresearcher bench env")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=5.0, help="Duration of the cached search run.")
    parser.add_argument("--world-size", default="tiny", choices=["tiny", "small", "medium"])
    parser.add_argument("--queries", type=int, default=300, help="Distinct cached queries cycled through.")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--extractor", default="trafilatura", choices=["trafilatura", "resiliparse"],
                        help="browse.extractor of the handler (HTML to text on a cold browse).")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        build_world(7, args.world_size, tmp / "world")
        web = LoopbackWeb.from_world(tmp / "world")
        with web.running():
            os.environ.update(web.env_vars)
            cache = tmp / "cache.sqlite"
            data = web.config_data(cache)
            data["browse"]["extractor"] = args.extractor
            (tmp / "handler.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
            proc = HandlerProcess(tmp / "handler.yaml", env=web.env_vars).start()
            try:
                return asyncio.run(_run(args, web, proc.url, proc.proc.pid, Config.model_validate(data)))
            finally:
                proc.stop()


async def _run(args: argparse.Namespace, web: LoopbackWeb, url: str, pid: int, config: Any) -> dict[str, Any]:
    titles = [p.get("title") or p["url"] for p in web.pages]
    queries = [f"{titles[i % len(titles)]} {i // len(titles) or ''}".strip() for i in range(args.queries)]
    search_bodies = [orjson.dumps({"queries": [q], "top_k": args.top_k}) for q in queries]
    page_urls = [web.site.local_url(p["url"]) for p in web.pages]
    browse_bodies = [
        orjson.dumps({"question": f"What is known about {t}?", "urls": [u], "notes": [], "queries": [t]})
        for t, u in zip(titles, page_urls)
    ]

    record = await _load(url + "/v1/search", search_bodies, args.concurrency, None)  # records every query
    upstream_before = web.search.calls
    search_cached = await _load(url + "/v1/search", search_bodies, args.concurrency, args.seconds, pid)
    search_cached["upstream_calls"] = web.search.calls - upstream_before
    browse_cold = await _load(url + "/v1/browse", browse_bodies, args.concurrency, None, pid)
    browse_cached = await _load(url + "/v1/browse", browse_bodies * 3, args.concurrency, None, pid)

    one = await _load(url + "/v1/search", search_bodies[:200], 1, None)
    one_browse = await _load(url + "/v1/browse", browse_bodies[:50], 1, None)
    env = WebEnvironment.from_config(config)
    try:
        search_calls = [("search", ([q], args.top_k)) for q in queries[:200]]
        browse_calls = [("browse", (f"What is known about {t}?", [u], [], [t])) for t, u in zip(titles[:50], page_urls[:50])]
        direct_search, direct_search_cpu = await _in_process_cost(env, search_calls)
        direct_browse, direct_browse_cpu = await _in_process_cost(env, browse_calls)
    finally:
        await env.aclose()

    return {
        "benchmark": "env",
        "concurrency": args.concurrency,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "pages": len(page_urls),
        "search_record_pass": record,
        "search_cached": search_cached,
        "browse_cold": browse_cold,
        "browse_cold_pages_per_core_s": round(1000 / browse_cold["server_cpu_ms_per_request"], 1)
        if browse_cold.get("server_cpu_ms_per_request") else None,
        "extractor": args.extractor,
        "browse_cached": browse_cached,
        "overhead_ms": {
            "search": round((one["latency_ms_p50"] or 0) - direct_search * 1000, 3),
            "browse": round((one_browse["latency_ms_p50"] or 0) - direct_browse * 1000, 3),
            "search_server_cpu": round(search_cached["server_cpu_ms_per_request"] - direct_search_cpu * 1000, 3),
            "browse_server_cpu": round(browse_cached["server_cpu_ms_per_request"] - direct_browse_cpu * 1000, 3),
            "search_service_p50_c1": one["latency_ms_p50"],
            "search_in_process_p50": round(direct_search * 1000, 3),
            "browse_service_p50_c1": one_browse["latency_ms_p50"],
            "browse_in_process_p50": round(direct_browse * 1000, 3),
        },
        "targets": {"search_cached_rps": 3000, "overhead_ms": 1.0},
    }


if __name__ == "__main__":
    print(orjson.dumps(main(__import__("sys").argv[1:]), option=orjson.OPT_INDENT_2).decode())
