"""Handler cluster benchmark: what a GRPO-like load pays upstream through several handlers, by routing.

Three ``deepresearcher serve`` processes on loopback, each with a SQLite cache of its own (as on three
hosts), over the loopback web (the synthetic world's pages on a website, a Serper emulator indexing
them). The load is a GRPO step: ``--groups`` groups of ``--group-size`` rollouts; every rollout of a group
searches its group's ``--queries-per-call`` queries in one call and browses its group's pages in one call,
all rollouts at once (``--concurrency`` in flight). The search API and the website count every call
that reaches them.

Four runs, each on fresh handlers and empty caches: ``least_loaded`` and ``keyed`` routing (``env.routing``),
each once undisturbed and once with handler 0 SIGKILLed after ``--kill-after`` of the rollouts answered.
Per run: upstream searches and page fetches against the distinct queries and pages, rollouts lost (a
call that raised or an item answered with an error), queries answered inconsistently across sends, and,
for the kill, the killed handler's share (the distinct queries whose keyed home it was).

    deepresearcher bench handlers --json
    deepresearcher bench handlers --groups 20 --group-size 16 --queries-per-call 2   # 40 queries x 16 sends

The bar (issue 29): with keyed routing upstream searches equal the distinct queries (least-loaded: about
3x with three handlers); with a kill nothing is lost and the extra searches stay within the killed
handler's share.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import tempfile
import time
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import orjson

from deepresearcher.testing.handlers import HandlerProcess
from deepresearcher.testing.loopback_web import LoopbackWeb
from deepresearcher.web.client import RemoteEnvironment, rendezvous_order, routing_key
from deepresearcher.web.types import BrowseResult, QueryResult
from deepresearcher.world import build_world

Rollout = tuple[list[QueryResult], list[BrowseResult]]


def _workload(web: LoopbackWeb, args: argparse.Namespace) -> tuple[list[list[str]], list[list[str]]]:
    """Per group: its distinct queries and its distinct pages (no two groups share one)."""
    titles = [p.get("title") or p["url"] for p in web.pages]
    per_query, per_page = args.queries_per_call, args.pages_per_call
    queries = [f"{titles[i % len(titles)]} {['history', 'population', 'founded', 'economy'][i // len(titles) % 4]}"
               for i in range(args.groups * per_query)]
    pages = [web.site.local_url(web.pages[i % len(web.pages)]["url"]) for i in range(args.groups * per_page)]
    return ([queries[g * per_query:(g + 1) * per_query] for g in range(args.groups)],
            [pages[g * per_page:(g + 1) * per_page] for g in range(args.groups)])


async def _step(
    env: RemoteEnvironment, queries: list[list[str]], pages: list[list[str]], args: argparse.Namespace,
    kill: HandlerProcess | None,
) -> tuple[list[tuple[int, Rollout | BaseException]], float, int | None]:
    """Run every rollout of every group (shuffled, ``--concurrency`` at once); kill ``kill`` part-way.
    Returns the outcomes, the wall time and how many rollouts had been answered when the kill landed."""
    order = [g for g in range(args.groups) for _ in range(args.group_size)]
    random.Random(args.seed).shuffle(order)
    gate = asyncio.Semaphore(args.concurrency)
    answered = 0
    kill_at = int(len(order) * args.kill_after)

    async def rollout(g: int) -> tuple[int, Rollout | BaseException]:
        nonlocal answered
        async with gate:
            try:
                found = await env.search(queries[g], args.top_k)
                read = await env.browse(f"What is known about {queries[g][0]}?", pages[g], queries=queries[g])
                outcome: Rollout | BaseException = (found, read)
            except Exception as exc:  # counted as lost
                outcome = exc
        answered += 1
        return g, outcome

    started = time.perf_counter()
    load = asyncio.gather(*(rollout(g) for g in order))
    answered_at_kill = None
    if kill is not None:
        while answered < kill_at:
            await asyncio.sleep(0.002)
        await asyncio.to_thread(kill.kill)
        answered_at_kill = answered
    outcomes = await load
    return outcomes, time.perf_counter() - started, answered_at_kill


def _run(web: LoopbackWeb, folder: Path, routing: str, killed: bool, args: argparse.Namespace) -> dict[str, Any]:
    """One scenario on fresh handler processes, each with an empty cache file of its own."""
    folder.mkdir(parents=True)
    queries, pages = _workload(web, args)
    with ExitStack() as stack:
        procs = []
        for i in range(args.handlers):
            config = web.write_config(folder / f"handler-{i}.yaml", folder / f"cache-{i}.sqlite")
            procs.append(HandlerProcess(config, env=web.env_vars).spawn())
            stack.callback(procs[-1].stop)
        for proc in procs:
            proc.wait_ready()
        urls = [proc.url for proc in procs]
        searches, fetches = web.search.calls, web.site.hits

        async def main() -> tuple[list[tuple[int, Rollout | BaseException]], float, int | None, list[int]]:
            async with RemoteEnvironment(urls, routing=routing, dead_for_s=args.dead_for_s) as env:  # type: ignore[arg-type]
                outcomes, wall, at_kill = await _step(env, queries, pages, args, procs[0] if killed else None)
                return outcomes, wall, at_kill, [s.served for s in env.servers]

        outcomes, wall, at_kill, served = asyncio.run(main())
        paid_searches, paid_fetches = web.search.calls - searches, web.site.hits - fetches

    distinct_queries = sorted({routing_key("/v1/search", q) for group in queries for q in group})
    distinct_pages = sorted({routing_key("/v1/browse", u) for group in pages for u in group})
    lost, answers = 0, defaultdict(set)
    for _, outcome in outcomes:
        if isinstance(outcome, BaseException):
            lost += 1
            continue
        found, read = outcome
        lost += any(r.error or not r.hits for r in found) or any(r.error for r in read)
        for r in found:
            answers[routing_key("/v1/search", r.query)].add(tuple(h.url for h in r.hits))
    result: dict[str, Any] = {
        "routing": routing,
        "killed_handler": 0 if killed else None,
        "rollouts": len(outcomes),
        "lost": lost,
        "queries_answered_inconsistently": sum(len(v) > 1 for v in answers.values()),
        "distinct_queries": len(distinct_queries),
        "upstream_searches": paid_searches,
        "upstream_searches_per_distinct": round(paid_searches / len(distinct_queries), 3),
        "distinct_pages": len(distinct_pages),
        "upstream_fetches": paid_fetches,
        "upstream_fetches_per_distinct": round(paid_fetches / len(distinct_pages), 3),
        "requests_served_per_handler": served,
        "wall_s": round(wall, 3),
    }
    if killed:
        result["rollouts_answered_at_kill"] = at_kill
        result["extra_upstream_searches"] = paid_searches - len(distinct_queries)
        result["extra_upstream_fetches"] = paid_fetches - len(distinct_pages)
    if killed and routing == "keyed":  # what the killed handler was home to: the most the kill may cost again
        result["killed_handler_share"] = sum(rendezvous_order(q, urls)[0] == 0 for q in distinct_queries)
        result["killed_handler_page_share"] = sum(rendezvous_order(u, urls)[0] == 0 for u in distinct_pages)
    return result


def main(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="deepresearcher bench handlers")
    parser.add_argument("--handlers", type=int, default=3, help="Handler processes, each with its own cache file.")
    parser.add_argument("--groups", type=int, default=20, help="Groups per step (each with its own queries and pages).")
    parser.add_argument("--group-size", type=int, default=16, help="Rollouts per group: each sends the group's calls.")
    parser.add_argument("--queries-per-call", type=int, default=2, help="Queries in each rollout's search call.")
    parser.add_argument("--pages-per-call", type=int, default=2, help="URLs in each rollout's browse call.")
    parser.add_argument("--concurrency", type=int, default=64, help="Rollouts in flight at once.")
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--kill-after", type=float, default=0.3, help="Share of rollouts answered before the kill.")
    parser.add_argument("--upstream-delay-s", type=float, default=0.02,
                        help="Seconds the search emulator takes per call (keeps requests in flight at the kill).")
    parser.add_argument("--dead-for-s", type=float, default=30.0, help="env.dead_for_s of the client.")
    parser.add_argument("--routing", choices=["both", "keyed", "least_loaded"], default="both")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the rollouts' order.")
    args = parser.parse_args(argv)
    if not 0 < args.kill_after < 1:
        parser.error("--kill-after is a share of the rollouts: between 0 and 1 (exclusive).")

    routings = ["least_loaded", "keyed"] if args.routing == "both" else [args.routing]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        build_world(7, "tiny", tmp / "world")
        web = LoopbackWeb.from_world(tmp / "world")
        with web.running():
            os.environ.update(web.env_vars)
            web.search.delay_s = args.upstream_delay_s
            runs = {
                routing + ("_kill" if killed else ""): _run(web, tmp / f"{routing}-{killed}", routing, killed, args)
                for routing in routings for killed in (False, True)
            }
    result: dict[str, Any] = {
        "benchmark": "handlers",
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "load": {k: getattr(args, k) for k in ("handlers", "groups", "group_size", "queries_per_call",
                                                "pages_per_call", "concurrency", "kill_after", "upstream_delay_s")},
        "runs": runs,
    }
    if "keyed" in runs:
        keyed, kill = runs["keyed"], runs["keyed_kill"]
        result["bar"] = {
            "keyed_upstream_equals_distinct": keyed["upstream_searches"] == keyed["distinct_queries"]
            and keyed["upstream_fetches"] == keyed["distinct_pages"],
            "kill_loses_nothing": kill["lost"] == 0,
            "kill_extra_within_share": 0 <= kill["extra_upstream_searches"] <= kill["killed_handler_share"]
            and 0 <= kill["extra_upstream_fetches"] <= kill["killed_handler_page_share"],
        }
    return result


if __name__ == "__main__":
    print(orjson.dumps(main(__import__("sys").argv[1:]), option=orjson.OPT_INDENT_2).decode())
