"""The small JSON-over-HTTP client that the server-backed generators share (one aiohttp session each)."""

from __future__ import annotations

import os
from typing import Any

from deepresearcher.errors import GenerationError


class JsonClient:
    """POST/GET JSON against one OpenAI-compatible ``/v1`` root; failures become ``GenerationError``."""

    def __init__(self, base_url: str, *, api_key_env: str | None = None, timeout_s: float = 600.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._api_key = os.environ.get(api_key_env) if api_key_env else None
        self._timeout_s = timeout_s
        self._session: Any = None

    def _client(self) -> Any:
        import aiohttp

        if self._session is None:
            headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
            self._session = aiohttp.ClientSession(headers=headers, timeout=aiohttp.ClientTimeout(total=self._timeout_s))
        return self._session

    async def request(self, method: str, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        import aiohttp

        try:
            async with self._client().request(method, self.base_url + path, json=payload) as response:
                body = await response.json(content_type=None)
                if response.status != 200:
                    raise GenerationError(f"Server {self.base_url} answered {response.status}: {str(body)[:300]}")
                return body
        except aiohttp.ClientError as exc:
            raise GenerationError(f"Server {self.base_url} unreachable: {exc}") from exc

    async def first_model(self) -> str:
        """The first model the server lists, for when none is configured."""
        models = (await self.request("GET", "/models")).get("data", [])
        if not models:
            raise GenerationError(f"Server {self.base_url} serves no model; set agent.policy_model.")
        return str(models[0]["id"])

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
