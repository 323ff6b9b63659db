"""The policy behind ``/v1/chat/completions``: any generator the project runs, each episode recorded token by token.

Routes (FastAPI):

    POST /episodes/{episode_id:path}/v1/chat/completions   the episode named by the base URL
    POST /v1/chat/completions                         the episode named by the API key (``Authorization: Bearer``)
    GET  /v1/models, /v1/models/{model}               (and the same under /episodes/{episode_id})
    GET  /episodes/{episode_id}                       the episode's record: requests, drifts, trajectories
    DELETE /episodes/{episode_id}                     the same, and the episode is forgotten
    GET  /healthz                                     requests served, drifted requests, open episodes

A trainer hands each agent run its own episode id, in the base URL (``episode_base_url``) or as the API key, so
agents running at once never mix; it then takes the run's trajectories with ``PolicyEndpoint.finish``. A request
with neither belongs to the episode ``default``. Requests of one episode are served one at a time.

Streaming answers (``stream: true``) arrive once the turn is sampled, as ``chat.completion.chunk`` events and
``data: [DONE]``. Errors are OpenAI's body and status (``endpoint.openai_types``), unknown routes included.

Sampling: a request's ``temperature``, ``top_p``, ``max_tokens`` / ``max_completion_tokens``, ``stop`` and ``seed``
are honoured, ``max_tokens`` within the served limit and the context budget, except under
``SamplingDefaults.force`` (training): the policy then samples at the temperature and top-p its log-probabilities
are trained at, and from the engine's own random streams (one agent's fixed ``seed`` would otherwise give every
episode of a group the same sample), whatever the agent asks for. The layout's stop strings always apply.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from deepresearcher.agent.trajectory import Trajectory
from deepresearcher.endpoint.episodes import Episode, EpisodeRecorder
from deepresearcher.endpoint.openai_types import (
    ChatRequest,
    Completion,
    OpenAIError,
    completion_body,
    completion_chunks,
    completion_id,
    validation_error,
)
from deepresearcher.endpoint.render import ChatRenderer
from deepresearcher.generate.base import Generator
from deepresearcher.inference.sampling import SamplingParams

logger = logging.getLogger(__name__)

DEFAULT_EPISODE = "default"
ALIAS = "policy"
"""A model name every endpoint answers to besides its own, so a program can be handed ``policy`` blind."""


@dataclass(frozen=True)
class SamplingDefaults:
    """What a turn is sampled with when the request does not say (or always, with ``force``)."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 2000
    context_budget: int = 32768
    max_turns: int | None = None
    """Requests one episode may make (None: no limit); past it the endpoint answers 400 ``turn_limit_reached``."""
    force: bool = False


def episode_base_url(server_url: str, episode_id: str) -> str:
    """The OpenAI base URL that puts every request of a client into ``episode_id``."""
    return f"{server_url.rstrip('/')}/episodes/{quote(episode_id, safe='')}/v1"


class PolicyEndpoint:
    """One policy, its chat renderer and the recorder of its episodes."""

    def __init__(self, generator: Generator, renderer: ChatRenderer, *, model_name: str = ALIAS,
                 defaults: SamplingDefaults | None = None, recorder: EpisodeRecorder | None = None) -> None:
        self.generator = generator
        self.renderer = renderer
        self.model_name = model_name
        self.defaults = defaults or SamplingDefaults()
        self.recorder = recorder or EpisodeRecorder()

    async def chat(self, episode_id: str, request: ChatRequest) -> Completion:
        """Sample the next turn of ``episode_id`` for ``request`` and record it."""
        self._check(request)
        episode = self.recorder.episode(episode_id)
        async with episode.lock:
            limit = self.defaults.max_turns
            if limit is not None and len(episode.exchanges) >= limit:
                raise OpenAIError(400, f"Episode {episode_id!r} has used its {limit} turns; answer without tools.",
                                  code="turn_limit_reached")
            prompt = self.renderer.prompt_ids(request.messages, request.tool_dicts(),
                                              episode.sampled_turns(request.messages))
            room = self.defaults.context_budget - len(prompt)
            if room < 1:
                raise OpenAIError(400, f"This model's maximum context length is {self.defaults.context_budget} "
                                  f"tokens; your messages resulted in {len(prompt)} tokens.", param="messages",
                                  code="context_length_exceeded")
            try:
                result = await self.generator.generate(prompt, self._params(request, room, episode_id))
            except Exception as exc:
                logger.exception("the policy failed on a request of episode %s", episode_id)
                raise OpenAIError(500, f"The policy failed to sample this turn: {type(exc).__name__}: {exc}",
                                  type="server_error") from exc
            text = result.text if result.text is not None else self.renderer.decode(result.token_ids)
            message = self.renderer.reply(text)
            finish = "length" if result.finish_reason == "length" else "tool_calls" if "tool_calls" in message \
                else "stop"
            exchange = episode.record(request.messages, prompt, result.token_ids, result.logprobs,
                                      result.finish_reason, text, message)
            self.recorder.count(exchange)
        usage = {"prompt_tokens": len(prompt), "completion_tokens": len(result.token_ids),
                 "total_tokens": len(prompt) + len(result.token_ids)}
        logprobs = self._token_logprobs(result.token_ids, result.logprobs) if request.logprobs else None
        return Completion(message, finish, usage, logprobs)

    def finish(self, episode_id: str) -> list[Trajectory]:
        """Take ``episode_id``'s record: its trajectories (the drift rule, ``endpoint.episodes``), each with the
        response text the rewards read (``Trajectory.response_text``, as the project's agent loop fills it)."""
        return self.trajectories(self.recorder.pop(episode_id))

    def trajectories(self, episode: Episode) -> list[Trajectory]:
        """``episode``'s trajectories, each with its ``response_text`` (the prefill, then every completion id decoded
        with special tokens kept) and ``metadata["exact_tokens"]``: False when the policy returns text only
        (``Generator.exact_tokens``), whose ids are re-tokenized and not trainable."""
        out = episode.trajectories()
        for trajectory in out:
            trajectory.response_text = self.renderer.layout.prefill + self.renderer.decode(
                trajectory.completion_ids, keep_special=True)
            trajectory.metadata["exact_tokens"] = bool(getattr(self.generator, "exact_tokens", True))
        return out

    def _check(self, request: ChatRequest) -> None:
        if request.model not in (self.model_name, ALIAS):
            raise OpenAIError(404, f"The model `{request.model}` does not exist; this endpoint serves "
                              f"`{self.model_name}`.", param="model", code="model_not_found")
        if request.n not in (None, 1):
            raise OpenAIError(400, f"n={request.n} is not supported: each request samples one turn of one episode "
                              "(run more episodes for more samples).", param="n", code="invalid_value")

    def _params(self, request: ChatRequest, room: int, episode_id: str) -> SamplingParams:
        d = self.defaults
        asked = request.max_completion_tokens or request.max_tokens or d.max_tokens
        return SamplingParams(
            max_tokens=min(d.max_tokens, asked, room),
            temperature=d.temperature if d.force or request.temperature is None else request.temperature,
            top_p=d.top_p if d.force or request.top_p is None else request.top_p,
            stop=list(dict.fromkeys([*self.renderer.layout.stop, *request.stops()])),
            seed=None if d.force else request.seed,
            session=session_of(episode_id),
        )

    def _token_logprobs(self, ids: list[int], logprobs: list[float] | None) -> list[dict[str, Any]]:
        """OpenAI's per-token ``logprobs.content``: the sampling log-probabilities (NaN when the policy has none);
        ``top_logprobs`` stay empty, as generators return only the sampled token's."""
        values = logprobs if logprobs is not None else [math.nan] * len(ids)
        out = []
        for token_id, value in zip(ids, values, strict=True):
            token = self.renderer.decode([token_id], keep_special=True)
            out.append({"token": token, "logprob": value, "bytes": list(token.encode()), "top_logprobs": []})
        return out


def session_of(episode_id: str) -> int:
    """The generation session of an episode (``SamplingParams.session``): local engines keep its KV cache between
    turns and key each turn's random stream by it, so the same episode id samples the same turns again."""
    return int.from_bytes(hashlib.blake2b(f"endpoint\x1f{episode_id}".encode(), digest_size=8).digest(), "big") >> 1


def create_app(endpoint: PolicyEndpoint) -> FastAPI:
    """The FastAPI app serving ``endpoint``."""
    app = FastAPI(title="deepresearcher policy endpoint", docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(OpenAIError)
    async def openai_error(_: Request, exc: OpenAIError) -> Response:
        return JSONResponse(exc.body, status_code=exc.status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        message = f"Unknown request URL: {request.method} {request.url.path}." if exc.status_code in (404, 405) \
            else str(exc.detail)
        code = "unknown_url" if exc.status_code in (404, 405) else None
        return JSONResponse(OpenAIError(exc.status_code, message, code=code).body, status_code=exc.status_code)

    async def chat(request: Request, episode_id: str) -> Response:
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError as exc:
            raise OpenAIError(400, f"We could not parse the JSON body of your request ({exc}).") from exc
        if not isinstance(body, dict):
            raise OpenAIError(400, "The request body must be a JSON object.")
        try:
            parsed = ChatRequest.model_validate(body)
        except ValidationError as exc:
            raise validation_error(exc) from exc
        answer = await endpoint.chat(episode_id, parsed)
        id_ = completion_id()
        if not parsed.stream:
            return JSONResponse(completion_body(id_, endpoint.model_name, answer))
        include_usage = bool(parsed.stream_options and parsed.stream_options.include_usage)
        chunks = completion_chunks(id_, endpoint.model_name, answer, include_usage)

        async def events() -> AsyncIterator[bytes]:
            for chunk in chunks:
                yield b"data: " + orjson.dumps(chunk) + b"\n\n"
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.post("/episodes/{episode_id:path}/v1/chat/completions")
    async def chat_in_episode(request: Request, episode_id: str) -> Response:
        return await chat(request, episode_id)

    @app.post("/v1/chat/completions")
    async def chat_by_key(request: Request) -> Response:
        scheme, _, key = request.headers.get("authorization", "").partition(" ")
        return await chat(request, key.strip() if scheme.lower() == "bearer" and key.strip() else DEFAULT_EPISODE)

    def model_card() -> dict[str, Any]:
        return {"id": endpoint.model_name, "object": "model", "created": 0, "owned_by": "deepresearcher"}

    @app.get("/v1/models")
    @app.get("/episodes/{episode_id:path}/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [model_card()]}

    @app.get("/v1/models/{model}")
    @app.get("/episodes/{episode_id:path}/v1/models/{model}")
    async def model(model: str) -> dict[str, Any]:
        if model not in (endpoint.model_name, ALIAS):
            raise OpenAIError(404, f"The model `{model}` does not exist.", param="model", code="model_not_found")
        return model_card()

    def record(episode: Episode | None, episode_id: str) -> dict[str, Any]:
        if episode is None:
            raise OpenAIError(404, f"No episode {episode_id!r} is recorded.", param="episode_id",
                              code="episode_not_found")
        return {"episode_id": episode.id, "requests": len(episode.exchanges), "drifts": episode.drifts,
                "trajectories": [t.model_dump(mode="json") for t in endpoint.trajectories(episode)]}

    @app.get("/episodes/{episode_id:path}")
    async def get_episode(episode_id: str) -> dict[str, Any]:
        return record(endpoint.recorder.get(episode_id), episode_id)

    @app.delete("/episodes/{episode_id:path}")
    async def delete_episode(episode_id: str) -> dict[str, Any]:
        episode = endpoint.recorder.get(episode_id)
        body = record(episode, episode_id)
        endpoint.recorder.pop(episode_id)
        return body

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {"status": "ok", "model": endpoint.model_name, **endpoint.recorder.stats()}

    return app
