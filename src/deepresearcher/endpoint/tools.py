"""The tools of a trainer's episodes, for agents given as programs: over MCP and over plain HTTP.

An agent that runs outside the project calls ``web_search`` and ``browse_webpage`` as the project's own agent loop
does: the same ``agent.tools.ToolBox`` (environment, cache, limits, reader) and, per episode, the state the loop
keeps for a rollout (``ToolContext``: the question the reader reads for, the URLs searched so far, the notes
already returned). A trainer opens each episode with its question and its world's toolbox (``ToolSessions.open``)
and hands the program URLs scoped to it:

    /episodes/{id}/mcp                   MCP, streamable HTTP: the tools with the agent's own schemas
    GET  /episodes/{id}/tools            {"tools": [...]}: the same schemas in OpenAI's function format
    POST /episodes/{id}/tools/{name}     the call's arguments as a JSON object -> {"text": ..., "error": null | "..."}

The schemas are ``agent.tools.TOOL_SCHEMAS``, the ones the policy was trained with, so ``browse_webpage`` takes no
question here (the episode knows it; the handler's stateless ``serve --mcp`` asks for it). A result is the
observation text the loop would show the policy; a failed call is an error result (``isError`` over MCP, ``error``
over HTTP) with that text, never a failed request. A call for an episode the trainer never opened is a 404.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcp import types
from mcp.server.lowlevel import Server

from deepresearcher import __version__
from deepresearcher.agent.mcp_server import tool_result
from deepresearcher.agent.tools import TOOL_SCHEMAS, ToolBox, ToolContext, ToolOutcome

if TYPE_CHECKING:
    from fastapi import FastAPI

EPISODE_TOOLS: list[types.Tool] = [
    types.Tool(name=s["function"]["name"], description=s["function"]["description"],
               input_schema=copy.deepcopy(s["function"]["parameters"]),
               annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=True))
    for s in TOOL_SCHEMAS
]


class UnknownEpisode(KeyError):
    """A tool call for an episode no trainer opened (or already closed)."""


@dataclass(frozen=True)
class ToolCall:
    """One call an episode made, and what it was answered."""

    name: str
    arguments: Any
    outcome: ToolOutcome


@dataclass
class _Session:
    toolbox: ToolBox
    context: ToolContext
    calls: list[ToolCall] = field(default_factory=list)


class ToolSessions:
    """The tool state of each open episode, shared by the MCP and HTTP routes (any thread may open and close)."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()

    def open(self, episode_id: str, question: str, toolbox: ToolBox) -> None:
        """Start ``episode_id``: its calls run on ``toolbox`` (its world's) for ``question``, with a fresh state."""
        with self._lock:
            self._sessions[episode_id] = _Session(toolbox, ToolContext(question=question))

    def close(self, episode_id: str) -> list[ToolCall]:
        """End ``episode_id``: the calls it made, in order (none for an episode never opened)."""
        with self._lock:
            session = self._sessions.pop(episode_id, None)
        return session.calls if session is not None else []

    async def call(self, episode_id: str, name: str, arguments: Any) -> ToolOutcome:
        """One call in ``episode_id``'s state, answered as the agent loop answers it (``ToolBox.call``)."""
        with self._lock:
            session = self._sessions.get(episode_id)
        if session is None:
            raise UnknownEpisode(episode_id)
        if not isinstance(arguments, dict):
            outcome = ToolOutcome(text='{"error": "The arguments must be a JSON object."}', error="arguments not an object")
        else:
            outcome = await session.toolbox.call(name, dict(arguments), session.context)
        session.calls.append(ToolCall(name, arguments, outcome))
        return outcome


def _episode_of(ctx: Any) -> str:
    request = getattr(ctx, "request", None)
    return str(request.path_params["episode_id"]) if request is not None else ""


def episode_tool_server(sessions: ToolSessions) -> Server[Any]:
    """The MCP server of the two tools, answering each call in the state of the episode its URL names."""

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=EPISODE_TOOLS)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        episode_id = _episode_of(ctx)
        try:
            outcome = await sessions.call(episode_id, params.name, params.arguments or {})
        except UnknownEpisode:
            return tool_result(f'{{"error": "No open episode {episode_id!r}."}}', error=True)
        return tool_result(outcome.text, error=outcome.error is not None)

    return Server("deepresearcher-episodes", version=__version__, on_list_tools=list_tools, on_call_tool=call_tool)


def mount_episode_tools(app: FastAPI, sessions: ToolSessions) -> None:
    """Serve ``sessions``' tools on ``app`` (module docstring): MCP at ``/episodes/{id}/mcp`` (stateless, JSON
    answers) and the HTTP routes; the MCP session manager runs inside the app's lifespan."""
    from fastapi import Body, HTTPException
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
    from starlette.routing import Route

    manager = StreamableHTTPSessionManager(app=episode_tool_server(sessions), json_response=True, stateless=True)
    before = len(app.router.routes)
    app.router.routes.append(Route("/episodes/{episode_id}/mcp", endpoint=StreamableHTTPASGIApp(manager)))

    @app.get("/episodes/{episode_id}/tools")
    async def tool_schemas(episode_id: str) -> dict[str, Any]:
        return {"tools": TOOL_SCHEMAS}

    @app.post("/episodes/{episode_id}/tools/{name}")
    async def call_tool(episode_id: str, name: str, arguments: Any = Body(...)) -> dict[str, Any]:
        try:
            outcome = await sessions.call(episode_id, name, arguments)
        except UnknownEpisode:
            raise HTTPException(404, f"No open episode {episode_id!r}: the trainer opens one per program run.") from None
        return {"text": outcome.text, "error": outcome.error}

    # ahead of the endpoint's own ``/episodes/{id:path}`` routes, which would take these paths
    app.router.routes[:] = app.router.routes[before:] + app.router.routes[:before]
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with manager.run(), inner(a) as state:
            yield state

    app.router.lifespan_context = lifespan
