"""``deepresearcher serve``: run the handler service (search + browse over HTTP) for trainers to share.

examples:
    deepresearcher serve --config configs/quickstart.yaml --host 127.0.0.1 --port 8000
    DR_TOKEN=secret deepresearcher serve --set serve.auth_token_env=DR_TOKEN --port 8001
    # clients: env.server_urls=[http://127.0.0.1:8000, http://127.0.0.1:8001]
"""

from __future__ import annotations

from pathlib import Path

import typer

from deepresearcher.cli.common import ConfigOption, SetOption, resolve_config


def register(app: typer.Typer) -> None:
    """Add the ``serve`` command."""

    @app.command("serve")
    def serve(
        config: Path | None = ConfigOption,
        host: str | None = typer.Option(None, "--host", help="Interface to listen on (default: serve.host)."),
        port: int | None = typer.Option(None, "--port", help="TCP port; 0 picks a free one (default: serve.port)."),
        overrides: list[str] | None = SetOption,
    ) -> None:
        """Serve POST /v1/search, /v1/browse, /retrieve (Search-R1), /access (ASearcher), GET /healthz, /metrics until Ctrl-C."""
        from deepresearcher.web.server import run_server

        cfg = resolve_config(config, overrides)
        run_server(cfg, host, port, on_listening=lambda url: typer.echo(f"deepresearcher handler listening on {url}"))
