"""The HTTP plumbing the keyed JSON search APIs share: one aiohttp session and error mapping.

Status codes become the errors of ``deepresearcher.errors`` here, once, by the package's one map
(``retry.error_for_status``, which the model client uses too), so each backend file only builds its
request and parses its answer:

    429                       -> RateLimitedError (with Retry-After, seconds or an HTTP date)
    401, 403                  -> ConfigError (the key, or the server's settings, need fixing; not retried)
    408, 409, 5xx, network, timeout -> BackendUnavailableError
    other 4xx, non-JSON       -> BadResponseError

API keys travel only in request headers; no message built here contains a header, so a key never
reaches a log line or an error.
"""

from __future__ import annotations

import asyncio
import html
import logging
import os
import re
from typing import Any

import aiohttp
import orjson

from deepresearcher.errors import BackendUnavailableError, BadResponseError, ConfigError
from deepresearcher.retry import LoopSession, error_for_status

logger = logging.getLogger(__name__)

_TAG = re.compile(r"<[^>]+>")
_WS = re.compile(r"\s+")


def read_api_key(env_var: str | None, backend: str) -> str:
    """The key from the environment variable ``env_var``; a missing one is a ConfigError naming the variable."""
    if not env_var:
        raise ConfigError(f"Backend {backend!r} needs an API key: set backends.{backend}.api_key_env to the name "
                          "of an environment variable that holds it.")
    key = os.environ.get(env_var, "").strip()
    if not key:
        raise ConfigError(f"Backend {backend!r} needs an API key: export {env_var}=<your key> "
                          f"(the variable is named by backends.{backend}.api_key_env).")
    return key


def clean_snippet(text: Any) -> str:
    """Plain text from a snippet that may carry highlight tags (``<strong>``) and entities."""
    if not isinstance(text, str):
        return ""
    return _WS.sub(" ", html.unescape(_TAG.sub("", text))).strip()


class JsonHttp:
    """An aiohttp session bound to one API's base URL; ``request`` returns the decoded JSON body."""

    def __init__(
        self,
        backend: str,
        base_url: str,
        timeout_s: float = 15.0,
        headers: dict[str, str] | None = None,
        forbidden_hint: str = "check the API key",
    ) -> None:
        self.backend = backend
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.forbidden_hint = forbidden_hint
        self._headers = {"Accept": "application/json", "User-Agent": "deepresearcher/0.1", **(headers or {})}
        self._session = LoopSession(lambda: aiohttp.ClientSession(
            headers=self._headers,
            timeout=aiohttp.ClientTimeout(total=self.timeout_s),
            connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
        ))

    def __repr__(self) -> str:  # never show headers: they hold the key
        return f"JsonHttp(backend={self.backend!r}, base_url={self.base_url!r})"

    async def request(
        self, method: str, path: str, *, params: dict[str, Any] | None = None, json: Any = None
    ) -> Any:
        """Send one request and return its JSON; failures are mapped as the module docstring says."""
        url = self.base_url + path
        where = f"{self.backend} ({self.base_url})"
        try:
            async with self._session.get().request(method, url, params=params, json=json) as resp:
                body = await resp.read()
                status = resp.status
                retry_after = resp.headers.get("Retry-After")
        except asyncio.TimeoutError as exc:
            raise BackendUnavailableError(f"{where} did not answer within {self.timeout_s:g}s.") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise BackendUnavailableError(f"{where} is unreachable ({type(exc).__name__}).") from None
        if status >= 400:
            raise error_for_status(status, where, repr(body[:200].decode(errors="replace")),
                                   retry_after=retry_after, refused_hint=self.forbidden_hint)
        try:
            return orjson.loads(body)
        except ValueError as exc:
            raise BadResponseError(f"{where} answered HTTP {status} with a body that is not JSON: "
                                   f"{body[:120].decode(errors='replace')!r}") from exc

    async def aclose(self) -> None:
        await self._session.aclose()


def require(condition: bool, backend: str, what: str) -> None:
    """Raise BadResponseError unless the answer has the documented shape."""
    if not condition:
        raise BadResponseError(f"{backend} answered JSON without {what}; the API format may have changed.")
