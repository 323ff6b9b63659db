"""Run handler services for tests and benchmarks: in a thread (fast) or as a real ``deepresearcher serve`` process.

A thread shares the test's process, so it starts in milliseconds; a process can be killed mid-request,
which is what the failover and cache-durability tests need.

Example::

    with handler_thread(create_app(config)) as url:
        ...                                   # http://127.0.0.1:PORT
    with HandlerProcess(config_path) as proc:
        proc.url; proc.kill()
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from deepresearcher.web.server import bind_socket


@contextmanager
def handler_thread(app: Any, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve an ASGI ``app`` with uvicorn in a daemon thread on ``port`` (0: a free one); yields its base URL.

    A fixed port brings a stopped handler back at the same URL, as a restarted machine would.
    """
    import uvicorn

    sock = bind_socket(host, port)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, lifespan="on", access_log=False, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="handler", daemon=True)
    thread.start()
    url = f"http://{host}:{port}"
    try:
        wait_healthy(url)
        yield url
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def wait_healthy(url: str, timeout_s: float = 60.0) -> None:
    """Block until ``GET url/healthz`` answers 200 (the environment is open), or raise TimeoutError."""
    deadline = time.monotonic() + timeout_s
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via an http_proxy
    while True:
        try:
            with opener.open(url + "/healthz", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"handler at {url} not healthy within {timeout_s:g} s")
        time.sleep(0.05)


class HandlerProcess:
    """``deepresearcher serve`` in a child process on a free port."""

    def __init__(self, config_path: str | Path, overrides: list[str] | None = None, env: dict[str, str] | None = None) -> None:
        self.config_path = Path(config_path)
        self.overrides = overrides or []
        self.env = env
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def spawn(self) -> HandlerProcess:
        """Start the process without waiting for it (start several, then :meth:`wait_ready` each)."""
        cmd = [sys.executable, "-m", "deepresearcher.cli.main", "serve", "--config", str(self.config_path), "--port", "0"]
        for override in self.overrides:
            cmd += ["--set", override]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, **(self.env or {})}
        )
        return self

    def wait_ready(self, timeout_s: float = 120.0) -> HandlerProcess:
        """Read the listening line, then wait until /healthz answers (the environment is open)."""
        assert self.proc is not None and self.proc.stdout is not None
        seen = []
        for line in self.proc.stdout:  # warnings may come first; then "deepresearcher handler listening on URL"
            if "listening on " in line:
                self.url = line.rsplit("listening on ", 1)[1].strip()
                break
            seen.append(line)
        else:
            self.proc.wait(10)
            raise RuntimeError("handler did not start:\n" + "".join(seen))
        threading.Thread(target=self._drain, daemon=True).start()  # keep its pipe from filling up
        wait_healthy(self.url, timeout_s)
        return self

    def start(self, timeout_s: float = 120.0) -> HandlerProcess:
        return self.spawn().wait_ready(timeout_s)

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for _ in self.proc.stdout:
            pass

    def kill(self) -> None:
        """SIGKILL: the process dies mid-request, as in a machine failure."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM and wait: in-flight requests finish and the cache is flushed. Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def __enter__(self) -> HandlerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
