"""Run the policy endpoint: ``deepresearcher serve --policy`` (until Ctrl-C), or on loopback inside a trainer.

In a trainer, the endpoint serves the policy the trainer samples with (``make_policy(config, model=...)``) on a
free loopback port, either as a task of the event loop already running (``LoopbackServer``: the loop that drives
the local engine, ``LocalEngine.run_driving``, serves the agents' requests too) or on a thread of its own with its
own loop (``ThreadedServer``, for a trainer that is not async; the local engine answers requests from any loop)::

    endpoint = endpoint_for(config, generator, tokenizer, model_name="policy", training=True)
    with ThreadedServer(create_app(endpoint)) as url:
        base_url = episode_base_url(url, episode_id)   # hand it to the agent (OPENAI_BASE_URL)
        ...                                             # the agent runs
        trajectories = endpoint.finish(episode_id)      # token-exact, endpoint.episodes

A generator whose client is bound to one event loop (vLLM's ``AsyncLLM``) must be used from the loop the endpoint
serves on: start it there (``LoopbackServer``), or let ``serve_policy`` build it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Any, Literal

from deepresearcher.config import Config
from deepresearcher.endpoint.app import PolicyEndpoint, SamplingDefaults, create_app
from deepresearcher.endpoint.episodes import EpisodeRecorder
from deepresearcher.endpoint.render import ChatLayout, ChatRenderer
from deepresearcher.generate.base import Generator

Layout = Literal["agent", "template"]
SERVED_EPISODES = 1024
"""Episodes a standalone server keeps before dropping the least recently used (nobody may ever take them)."""


def endpoint_for(config: Config, generator: Generator, tokenizer: Any, *, model_name: str, training: bool,
                 layout: Layout = "agent", max_episodes: int | None = None, turn_limit: bool | None = None
                 ) -> PolicyEndpoint:
    """The endpoint of a policy under ``config``.

    ``layout``: ``agent`` lays turns out as the project's agent is trained (``agent.protocol``'s system turn when
    the client sends none, ``<think>`` prefilled, its stop strings; ``endpoint.render.ChatLayout``), ``template``
    uses the bare chat template (a stock instruct model behind an outside agent framework). ``training`` forces
    sampling at ``agent.temperature`` / ``agent.top_p``; else ``eval.temperature`` is the default a request may
    override. ``turn_limit`` (default: ``training``) limits episodes to ``agent.max_turns`` requests, as the
    project's agent loop is limited (``eval --agent`` sets it, so a program is evaluated under the same budget)."""
    from deepresearcher.agent.session import agent_protocol, episode_settings, make_template

    agent = episode_settings(config, generator, "train" if training else "eval")
    chat_layout = ChatLayout()
    if layout == "agent":
        chat_layout = ChatLayout.for_protocol(agent_protocol(config), make_template(tokenizer, config).system)
    defaults = SamplingDefaults(
        temperature=agent.temperature, top_p=agent.top_p, max_tokens=agent.max_tokens_per_turn,
        context_budget=agent.context_budget,
        max_turns=agent.max_turns if (training if turn_limit is None else turn_limit) else None, force=training)
    return PolicyEndpoint(generator, ChatRenderer(tokenizer, chat_layout), model_name=model_name, defaults=defaults,
                          recorder=EpisodeRecorder(max_episodes))


def _server(app: Any, **options: Any) -> Any:
    import uvicorn

    return uvicorn.Server(uvicorn.Config(app, lifespan="on", access_log=False, log_level="warning", **options))


class LoopbackServer:
    """``async with LoopbackServer(app) as url:`` serves ``app`` on a free loopback port, on the running loop."""

    def __init__(self, app: Any, host: str = "127.0.0.1") -> None:
        from deepresearcher.web.server import bind_socket

        self._socket = bind_socket(host, 0)
        self.url = f"http://{host}:{self._socket.getsockname()[1]}"
        self._server = _server(app)
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> str:
        self._task = asyncio.create_task(self._server.serve(sockets=[self._socket]))
        while not self._server.started:
            if self._task.done():  # it failed to start: raise its error
                await self._task
                raise RuntimeError(f"the endpoint at {self.url} stopped before it started")
            await asyncio.sleep(0.01)
        return self.url

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._socket.close()


class ThreadedServer:
    """``with ThreadedServer(app) as url:`` serves ``app`` on a free loopback port, on a thread and loop of its own."""

    def __init__(self, app: Any, host: str = "127.0.0.1", start_timeout_s: float = 30.0) -> None:
        from deepresearcher.web.server import bind_socket

        self._socket = bind_socket(host, 0)
        self.url = f"http://{host}:{self._socket.getsockname()[1]}"
        self._server = _server(app)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]},
                                        name="dr-policy-endpoint", daemon=True)
        self._start_timeout_s = start_timeout_s

    def __enter__(self) -> str:
        self._thread.start()
        deadline = time.monotonic() + self._start_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"the policy endpoint did not start at {self.url}")
            time.sleep(0.01)
        return self.url

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(30)
        self._socket.close()


def serve_policy(config: Config, host: str, port: int, *, layout: Layout = "agent",
                 on_listening: Callable[[str], None] | None = None) -> None:
    """Serve ``agent.policy`` behind ``/v1/chat/completions`` until SIGINT/SIGTERM; ``on_listening`` gets the
    OpenAI base URL. The policy is built before the port opens, so a bad model name fails as a one-line error."""
    from deepresearcher.generate.factory import make_policy
    from deepresearcher.web.server import bind_socket

    generator, tokenizer = make_policy(config)
    endpoint = endpoint_for(config, generator, tokenizer, model_name=config.agent.policy, training=False,
                            layout=layout, max_episodes=SERVED_EPISODES)
    app = create_app(endpoint)

    @contextlib.asynccontextmanager
    async def close_policy(_: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await generator.aclose()

    app.router.lifespan_context = close_policy
    sock = bind_socket(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    if on_listening is not None:
        on_listening(f"http://{'[' + bound_host + ']' if ':' in bound_host else bound_host}:{bound_port}/v1")
    _server(app, timeout_graceful_shutdown=config.serve.graceful_timeout_s).run(sockets=[sock])
