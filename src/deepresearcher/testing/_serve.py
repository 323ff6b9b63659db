"""Run an aiohttp application on loopback in a background thread: the engine of every test server here."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web


@contextmanager
def serve_in_thread(app: web.Application, name: str, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve ``app`` on ``host:port`` (0 = a free port) in a daemon thread with its own event loop.

    Yields the server's base URL (``http://host:port``); on exit the loop stops and the runner is cleaned up.
    """
    loop = asyncio.new_event_loop()
    started = threading.Event()
    runner = web.AppRunner(app, access_log=None)
    address: list[str] = []

    async def start() -> None:
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        sock = site._server.sockets[0]  # type: ignore[union-attr]
        address.append(f"http://{host}:{sock.getsockname()[1]}")

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        started.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=serve, name=name, daemon=True)
    thread.start()
    if not started.wait(10):
        raise RuntimeError(f"the {name} server did not start within 10 s")
    try:
        yield address[0]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
