"""One map from an HTTP status to an error, the same for a search API and a model server, over real HTTP."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from deepresearcher.errors import BackendUnavailableError, BadResponseError, ConfigError, RateLimitedError
from deepresearcher.inference.http import OpenAIHttpClient
from deepresearcher.retry import Limits, LoopSession, error_for_status
from deepresearcher.testing.openai_server import OpenAIEmulator, Reply
from deepresearcher.web.backends._http import JsonHttp

MAP = {
    400: BadResponseError, 404: BadResponseError, 422: BadResponseError,
    401: ConfigError, 403: ConfigError,
    408: BackendUnavailableError, 409: BackendUnavailableError, 500: BackendUnavailableError,
    502: BackendUnavailableError, 503: BackendUnavailableError, 504: BackendUnavailableError,
    429: RateLimitedError,
}
RETRIED = {408, 409, 429, 500, 502, 503, 504}


@pytest.mark.parametrize("status", sorted(MAP))
async def test_search_and_model_clients_map_a_status_alike(status):
    """The keyed search client and the model client raise the same error for a status; the model client
    retries exactly the statuses the map calls retryable, and gives up at once on the others."""
    with OpenAIEmulator(responder=lambda body: Reply(status=status, retry_after=0.0)).running() as server:
        model = OpenAIHttpClient(server.base_url, limits=Limits(retries=1, backoff_s=0.0, max_backoff_s=0.0))
        search = JsonHttp("serper", server.base_url, timeout_s=5.0)
        with pytest.raises(MAP[status]) as from_model:
            await model.post("/chat/completions", {"model": "m", "messages": []})
        model_requests = len(server.headers)
        with pytest.raises(MAP[status]) as from_search:
            await search.request("POST", "/chat/completions", json={"model": "m", "messages": []})
        await model.aclose()
        await search.aclose()
    assert type(from_model.value) is type(from_search.value) is MAP[status]
    assert model_requests == (2 if status in RETRIED else 1)
    assert f"HTTP {status}" in str(from_search.value) or status == 429


def test_a_refusal_names_what_to_fix():
    error = error_for_status(401, "serper (https://google.serper.dev)", "", refused_hint="check SERPER_API_KEY")
    assert isinstance(error, ConfigError) and "check SERPER_API_KEY" in str(error)
    limited = error_for_status(429, "x", "", retry_after="7")
    assert isinstance(limited, RateLimitedError) and limited.retry_after == 7.0


def test_a_loop_session_is_the_running_loops():
    """Within a loop one session serves every call; a new loop (a second CLI command) gets a new one."""
    made: list[aiohttp.ClientSession] = []

    def make() -> aiohttp.ClientSession:
        made.append(aiohttp.ClientSession())
        return made[-1]

    holder = LoopSession(make)

    async def twice() -> tuple[bool, bool]:
        first, fresh = holder.get(), holder.fresh_loop
        again, fresh_again = holder.get(), holder.fresh_loop
        assert first is again
        await holder.aclose()
        return fresh, fresh_again

    assert asyncio.run(twice()) == (True, False)
    assert asyncio.run(twice()) == (True, False)
    assert len(made) == 2 and all(session.closed for session in made)
