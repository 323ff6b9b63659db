"""``deepresearcher serve``: run the handler service (search + browse over HTTP) for trainers to share.

examples:
    deepresearcher serve --config configs/quickstart.yaml --host 127.0.0.1 --port 8000
    DR_TOKEN=secret deepresearcher serve --set serve.auth_token_env=DR_TOKEN --port 8001
    # clients: env.server_urls=[http://127.0.0.1:8000, http://127.0.0.1:8001]
    deepresearcher serve --mcp --port 8000              # also MCP (streamable HTTP) at http://127.0.0.1:8000/mcp
    deepresearcher serve --mcp --transport stdio        # MCP on stdin/stdout, for clients that spawn their tools
    deepresearcher serve --policy smollm2 --port 8100   # the policy: OpenAI chat completions at .../v1 (docs/agents.md)
    deepresearcher serve --policy runs/quickstart/model # a run's model, served with that run's config.yaml
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import cast

import typer

from deepresearcher.cli.common import ConfigOption, SetOption, config_for_policy, resolve_config


def register(app: typer.Typer) -> None:
    """Add the ``serve`` command."""

    @app.command("serve")
    def serve(
        config: Path | None = ConfigOption,
        host: str | None = typer.Option(None, "--host", help="Interface to listen on (default: serve.host)."),
        port: int | None = typer.Option(None, "--port", help="TCP port; 0 picks a free one (default: serve.port)."),
        overrides: list[str] | None = SetOption,
        mcp: bool = typer.Option(False, "--mcp", help="Also serve web_search and browse_webpage as MCP tools "
                                 "(at /mcp)."),
        transport: str = typer.Option("http", "--transport", help="With --mcp: `http` (beside the HTTP routes) or "
                                      "`stdio` (MCP alone, on stdin/stdout)."),
        policy: str | None = typer.Option(None, "--policy", help="Serve this policy (an agent.policy name: `smollm2`, "
                                          "a model directory, `vllm:...`) behind OpenAI's /v1/chat/completions "
                                          "instead of the handler, every episode recorded (docs/agents.md)."),
        layout: str = typer.Option("agent", "--layout", help="With --policy: `agent` (turns laid out as the "
                                   "project's agent is trained) or `template` (the bare chat template)."),
    ) -> None:
        """Serve POST /v1/search, /v1/browse, /retrieve (Search-R1), /access (ASearcher), GET /healthz, /metrics until
        Ctrl-C; with --policy, the policy behind OpenAI's POST /v1/chat/completions instead."""
        if transport not in ("http", "stdio"):
            raise typer.BadParameter(f"{transport!r} is not a transport: use http or stdio.", param_hint="--transport")
        if transport == "stdio" and not mcp:
            raise typer.BadParameter("stdio serves the MCP tools alone: add --mcp.", param_hint="--transport")
        if policy is not None:
            _serve_policy(config, policy, overrides or [], host, port, layout, mcp)
            return
        cfg = resolve_config(config, overrides)
        if transport == "stdio":  # stdout is the protocol's: nothing else may be printed there
            from deepresearcher.agent.mcp_server import run_stdio

            run_stdio(cfg)
            return
        from deepresearcher.web.server import run_server

        extend, mcp_path = None, None
        if mcp:
            from deepresearcher.agent.mcp_server import MCP_PATH, mount_mcp

            extend, mcp_path = functools.partial(mount_mcp, config=cfg), MCP_PATH

        def listening(url: str) -> None:
            typer.echo(f"deepresearcher handler listening on {url}")
            if mcp_path:
                typer.echo(f"MCP tools (streamable HTTP) at {url}{mcp_path}")

        run_server(cfg, host, port, on_listening=listening, extend=extend)


def _serve_policy(config: Path | None, policy: str, overrides: list[str], host: str | None, port: int | None,
                  layout: str, mcp: bool) -> None:
    if layout not in ("agent", "template"):
        raise typer.BadParameter(f"{layout!r} is not a layout: use agent or template.", param_hint="--layout")
    if mcp:
        raise typer.BadParameter("--policy serves the policy alone; serve the tools (--mcp) from another process.",
                                 param_hint="--policy")
    from deepresearcher.endpoint.server import Layout, serve_policy

    cfg = resolve_config(config_for_policy(config, policy), [*overrides, f"agent.policy={policy}"])
    serve_policy(cfg, host or cfg.serve.host, cfg.serve.port if port is None else port, layout=cast(Layout, layout),
                 on_listening=lambda url: typer.echo(f"deepresearcher policy {cfg.agent.policy} at {url}"))
