"""``web_search`` and ``browse_webpage`` as an MCP server, so an agent framework needs no code of ours to call them.

The tools are the agent's own (``agent.tools``): their input schemas are ``TOOL_SCHEMAS`` (``browse_webpage``
gains a required ``question``, which the agent loop knows from its rollout but an outside client must say), their
arguments are checked and their limits applied by ``ToolBox``, and a result is the observation text the agent
loop would show the policy (``browse.observation_format``). A bad call or a failed search comes back as a tool
error (``isError``) whose text says what went wrong; the server never fails a call at the protocol level.

Every call is answered on its own, like the handler's ``/v1/*`` routes and the protocol's modern sessionless era:
no state is kept between calls, so any handler of a fleet can answer any call and a restarted one loses nothing.
What a rollout's state would add is left to the client: a page's notes are not checked against earlier calls',
and ``browse.only_searched_urls`` (a rule about one rollout's searches) does not apply.

Two transports (the official ``mcp`` SDK's), over the environment the process already has, so its cache,
backends, readers and limits apply to MCP calls as to every other caller:

- streamable HTTP at ``/mcp`` of the handler service (``deepresearcher serve --mcp``): same process, environment
  and cache as ``/v1/search`` and ``/v1/browse``, behind the same bearer token;
- stdio (``deepresearcher serve --mcp --transport stdio``) for clients that spawn their tools.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import orjson
from mcp import types
from mcp.server.lowlevel import Server

from deepresearcher import __version__
from deepresearcher.agent.tools import TOOL_SCHEMAS, ToolBox, ToolContext
from deepresearcher.config import Config

if TYPE_CHECKING:
    from fastapi import FastAPI

logger = logging.getLogger(__name__)

MCP_PATH = "/mcp"
"""Where ``serve --mcp`` answers MCP's streamable HTTP transport on the handler service."""

QUESTION = "question"

INSTRUCTIONS = (
    "Research tools over one web environment. web_search runs a few queries and lists each one's pages (title, URL, "
    "short summary). browse_webpage reads a few of those pages for your question and returns what they say about "
    "it. Each call stands alone: pass the question with every browse_webpage call."
)


def _mcp_tool(schema: dict[str, Any]) -> types.Tool:
    """An agent tool schema (OpenAI function format) as an MCP tool; ``browse_webpage`` also takes the question."""
    function = schema["function"]
    parameters = copy.deepcopy(function["parameters"])
    if function["name"] == "browse_webpage":
        parameters["properties"][QUESTION] = {
            "type": "string", "description": "The question the pages are read for: the reader keeps what answers it."}
        parameters["required"] = [*parameters["required"], QUESTION]
    return types.Tool(
        name=function["name"], description=function["description"], input_schema=parameters,
        annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=True),
    )


MCP_TOOLS: list[types.Tool] = [_mcp_tool(schema) for schema in TOOL_SCHEMAS]


def tool_result(text: str, error: bool) -> types.CallToolResult:
    """A call's observation text as an MCP result (``isError`` for a failed call)."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


def _error(message: str) -> types.CallToolResult:
    """A failed call in the agent's own error observation shape, ``{"error": "..."}``."""
    return tool_result(orjson.dumps({"error": message}).decode(), error=True)


async def _call_tool(toolbox: ToolBox, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
    """Answer one MCP call with the observation the agent loop would get for it; never raises."""
    arguments = dict(arguments or {})
    question = arguments.pop(QUESTION, None) if name == "browse_webpage" else None
    if name == "browse_webpage" and not (isinstance(question, str) and question.strip()):
        return _error(f'browse_webpage needs the argument "{QUESTION}": the question the pages are read for, '
                      'a non-empty string.')
    try:
        outcome = await toolbox.call(name, arguments, ToolContext(question=(question or "").strip()))
    except Exception as exc:  # a bug below the toolbox: one failed call, never a failed server
        logger.exception("MCP call of %s crashed", name)
        return _error(f"{name} failed: {type(exc).__name__}: {exc}")
    return tool_result(outcome.text, error=outcome.error is not None)


def tool_server(toolbox: Callable[[], ToolBox]) -> Server[Any]:
    """The MCP server of the two tools; ``toolbox()`` gives the toolbox a call runs on (the environment may open
    after the server is built, as the handler's does in its app's lifespan)."""

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=MCP_TOOLS)

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await _call_tool(toolbox(), params.name, params.arguments)

    return Server("deepresearcher", version=__version__, instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=on_call_tool)


def _stateless(config: Config) -> Config:
    """``config`` for calls that carry no rollout: ``browse.only_searched_urls`` off, since no earlier search of
    the caller's is known and the rule would refuse every page."""
    return config.model_copy(update={"browse": config.browse.model_copy(update={"only_searched_urls": False})})


def mount_mcp(app: FastAPI, config: Config) -> None:
    """Serve the tools over streamable HTTP at ``/mcp`` of the handler ``app`` (``web.server.create_app``), on the
    environment its lifespan opens, behind its bearer token; answers are JSON (no server-sent events are needed:
    a call sends no notifications)."""
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
    from starlette.routing import Route

    from deepresearcher.web.server import BearerGuard

    tools_config = _stateless(config)
    manager = StreamableHTTPSessionManager(
        app=tool_server(lambda: ToolBox(app.state.env, tools_config)),
        json_response=True, stateless=True, max_request_body_size=config.serve.max_body_bytes,
    )
    app.router.routes.append(Route(MCP_PATH, endpoint=BearerGuard(StreamableHTTPASGIApp(manager), config)))
    handler_lifespan = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with handler_lifespan(a) as state, manager.run():  # the environment opens first, closes last
            yield state

    app.router.lifespan_context = lifespan


def run_stdio(config: Config) -> None:
    """Serve the tools to the one client on stdin/stdout until it closes them, then close the environment
    (flushing its cache). The environment is ``make_environment``'s, built before the first message so that one
    that cannot start (a missing API key) says why in one line."""
    from mcp.server.stdio import stdio_server

    from deepresearcher.web import make_environment

    env = make_environment(config)
    toolbox = ToolBox(env, _stateless(config))
    server = tool_server(lambda: toolbox)

    async def serve() -> None:
        try:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
        finally:
            await env.aclose()

    asyncio.run(serve())
