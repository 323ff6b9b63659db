"""Keyed routing over real handlers: each query and URL has a home handler, so a cluster of per-handler
caches pays for a repeated query once; failover follows the key's rendezvous order and comes back."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from deepresearcher.testing.handlers import HandlerProcess, handler_thread
from deepresearcher.web.client import RemoteEnvironment, rendezvous_order, routing_key
from deepresearcher.web.server import bind_socket, create_app

SEARCH, BROWSE = "/v1/search", "/v1/browse"


@contextmanager
def handlers(web, folder: Path, count: int = 3) -> Iterator[list[str]]:
    """``count`` handler services in threads, each with a cache file of its own (as on separate hosts)."""
    with ExitStack() as stack:
        yield [
            stack.enter_context(handler_thread(create_app(web.config(folder / f"cache-{i}.sqlite"))))
            for i in range(count)
        ]


def titles(web) -> list[str]:
    return [p["title"] for p in web.pages if p.get("title")]


def homed_at(urls: list[str], path: str, candidates: list[str], index: int) -> list[str]:
    """The candidates whose home (first in rendezvous order) is server ``index``."""
    return [c for c in candidates if rendezvous_order(routing_key(path, c), urls)[0] == index]


def free_port() -> int:
    with bind_socket("127.0.0.1", 0) as sock:
        return sock.getsockname()[1]


def test_homes_are_stable_balanced_and_move_only_with_their_server():
    """Every key has one home whatever the URL order; 3,000 keys split evenly over three servers; the
    cache's normalization decides the home; removing a server moves only the keys it was home to."""
    urls = ["http://10.0.0.5:8000", "http://10.0.0.6:8000", "http://10.0.0.7:8000/"]
    keys = [routing_key(SEARCH, f"query number {i}") for i in range(3000)]
    homes = {k: urls[rendezvous_order(k, urls)[0]] for k in keys}

    counts = Counter(homes.values())
    assert len(counts) == 3 and all(900 <= n <= 1100 for n in counts.values()), counts
    for permuted in itertools.permutations(urls):
        assert all(permuted[rendezvous_order(k, permuted)[0]] == homes[k] for k in keys[:300])
    assert routing_key(SEARCH, "  Who wrote\tDUNE?") == routing_key(SEARCH, "who wrote dune?")
    assert routing_key(BROWSE, "HTTPS://Example.COM/a#top") == routing_key(BROWSE, "https://example.com/a")

    remaining = urls[:2]
    for k in keys:
        home = remaining[rendezvous_order(k, remaining)[0]]
        if homes[k] in remaining:
            assert home == homes[k], "a key moved though its home is still there"
    env = RemoteEnvironment(urls)
    assert env.home_order(SEARCH, "  Query NUMBER 7") == rendezvous_order(keys[7], urls)


def test_failover_follows_the_rendezvous_order_and_the_home_takes_its_keys_back(web, tmp_path):
    """With a key's home down, its requests go to the second server in the key's order (never the third);
    the home is skipped while dead; once it is back and ``dead_for_s`` has passed, it answers again."""
    ports = [free_port() for _ in range(3)]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    query = homed_at(urls, SEARCH, titles(web), 0)[0]
    order = rendezvous_order(routing_key(SEARCH, query), urls)
    apps = {i: create_app(web.config(tmp_path / f"cache-{i}.sqlite")) for i in order[1:]}

    async def ask(env: RemoteEnvironment) -> list[int]:
        before = [s.served for s in env.servers]
        (result,) = await env.search([query], 3)
        assert result.query == query and result.hits and result.error is None
        return [s.served - b for s, b in zip(env.servers, before)]

    async def scenario() -> None:
        async with RemoteEnvironment(urls, dead_for_s=2.0) as env:
            with handler_thread(apps[order[1]], port=ports[order[1]]), handler_thread(apps[order[2]], port=ports[order[2]]):
                second = [int(i == order[1]) for i in range(3)]
                assert await ask(env) == second
                assert env.servers[0].failures == 1 and env.servers[0].dead_until > time.monotonic()
                assert await ask(env) == second
                assert env.servers[0].failures == 1, "a dead home was tried again while dead"
                with handler_thread(create_app(web.config(tmp_path / "cache-0.sqlite")), port=ports[0]):
                    await asyncio.sleep(max(0.0, env.servers[0].dead_until - time.monotonic()) + 0.05)
                    assert await ask(env) == [1, 0, 0], "the home did not take its key back"

    asyncio.run(scenario())


async def test_a_split_batch_comes_back_in_order(web, tmp_path):
    """A search or browse batch whose items have homes on all three servers is sent as one part per
    server, concurrently; the answers come back in the caller's order, equal to asking one at a time."""
    with handlers(web, tmp_path) as urls:
        per_home = [homed_at(urls, SEARCH, titles(web), i)[:3] for i in range(3)]
        queries = [q for trio in zip(*per_home) for q in trio]  # homes interleaved: 0, 1, 2, 0, 1, 2, ...
        random.Random(3).shuffle(queries)
        async with RemoteEnvironment(urls) as env:
            batch = await env.search(queries, 3)
            assert [s.served for s in env.servers] == [1, 1, 1]
            assert await env.search([], 3) == [] and await env.browse("q", []) == [], "in process: no items, no results"
            assert [s.served for s in env.servers] == [1, 1, 1], "an empty batch was sent"
            singles = [(await env.search([q], 3))[0] for q in queries]

            pages = [web.site.local_url(p["url"]) for p in web.pages]
            urls_batch = [u for i in range(3) for u in homed_at(urls, BROWSE, pages, i)[:2]]
            random.Random(4).shuffle(urls_batch)
            before = [s.served for s in env.servers]
            browsed = await env.browse("What is known about them?", urls_batch, notes=["n"], queries=["q"])
            assert [s.served - b for s, b in zip(env.servers, before)] == [1, 1, 1]
    assert [r.query for r in batch] == queries
    assert [r.model_dump() for r in batch] == [r.model_dump() for r in singles]
    assert [r.url for r in browsed] == urls_batch
    assert all(r.error is None and r.title for r in browsed), browsed


async def _grpo_load(env: RemoteEnvironment, groups: list[list[str]], group_size: int, pages: list[list[str]]) -> list:
    """Every rollout of every group searches its group's queries and browses its group's pages, all at once."""

    async def rollout(g: int) -> tuple:
        found = await env.search(groups[g], 3)
        read = await env.browse(f"question {g}", pages[g])
        return found, read

    return await asyncio.gather(*(rollout(g) for g in range(len(groups)) for _ in range(group_size)))


async def test_upstream_calls_equal_distinct_queries_with_three_handlers(web, tmp_path):
    """12 distinct queries and 12 distinct pages, each asked by the 8 rollouts of its group at once:
    with keyed routing over three handlers (three caches) the search API and the website see each once;
    with least-loaded routing the same load is paid more than once per query."""
    queries = [f"{t} census" for t in titles(web)[:12]]
    groups = [queries[i:i + 2] for i in range(0, 12, 2)]
    site_pages = [web.site.local_url(p["url"]) for p in web.pages[:12]]
    pages = [site_pages[i:i + 2] for i in range(0, 12, 2)]
    paid = {}
    for routing in ("keyed", "least_loaded"):
        with handlers(web, tmp_path / routing) as urls:
            searches, fetches = web.search.calls, web.site.hits
            async with RemoteEnvironment(urls, routing=routing) as env:
                answers = await _grpo_load(env, groups, 8, pages)
            paid[routing] = (web.search.calls - searches, web.site.hits - fetches)
        assert all(r.hits and r.error is None for found, _ in answers for r in found)
        assert all(r.title and r.error is None for _, read in answers for r in read)
    assert paid["keyed"] == (12, 12)
    assert paid["least_loaded"][0] > 12 and paid["least_loaded"][1] > 12, paid


def test_killing_a_handler_mid_run_loses_nothing_and_costs_at_most_its_share(web, tmp_path):
    """Three handlers with caches of their own; handler A is a `deepresearcher serve` process, SIGKILLed
    once a third of a GRPO-like load is answered. Every send still gets its answer, and the search API
    is paid again only for queries A was home to."""
    proc = HandlerProcess(web.write_config(tmp_path / "a.yaml", tmp_path / "cache-a.sqlite"), env=web.env_vars).spawn()
    queries = [f"{t} history" for t in titles(web)[:18]]
    sends = [q for q in queries for _ in range(6)]
    random.Random(5).shuffle(sends)

    async def scenario(urls: list[str]) -> tuple[list, int]:
        done = 0
        gate = asyncio.Semaphore(8)

        async def send(q: str):
            nonlocal done
            async with gate:
                await asyncio.sleep(0.01)  # the policy generating its call: the load outlasts the kill
                result = await env.search([q], 3)
            done += 1
            return result

        async with RemoteEnvironment(urls, dead_for_s=60) as env:
            load = asyncio.gather(*(send(q) for q in sends))
            while done < len(sends) // 3:
                await asyncio.sleep(0.005)
            await asyncio.to_thread(proc.kill)
            return await load, env.servers[0].failures

    web.search.delay_s = 0.02  # keep requests in flight on A when it dies
    calls = web.search.calls
    try:
        with handlers(web, tmp_path, count=2) as others:
            proc.wait_ready()
            urls = [proc.url, *others]
            results, failures = asyncio.run(scenario(urls))
    finally:
        web.search.delay_s = 0.0
        proc.stop()
    paid = web.search.calls - calls
    share = len(homed_at(urls, SEARCH, queries, 0))
    assert proc.proc.returncode == -9 and failures >= 1
    assert [r[0].query for r in results] == sends
    assert all(r[0].hits and r[0].error is None for r in results), "a request was lost"
    assert len(queries) <= paid <= len(queries) + share, (paid, share)
