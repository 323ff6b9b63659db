"""A real OpenAI-compatible server on loopback, scriptable to answer like a reader or a policy (or fail).

Tests and benchmarks of the LLM clients, the LLM reader and the server policies talk to it over real
HTTP, so retries, timeouts and parsing are exercised without a GPU or the internet. Each
``POST /v1/chat/completions`` or ``POST /v1/completions`` takes the next :class:`Reply` from the script;
once the script is used up, the ``responder`` answers (for a reader, :func:`keyword_reader` extracts
sentences holding the question's names). ``GET /v1/models`` lists one model, ``emulator``.

``/v1/completions`` speaks vLLM's dialect: a prompt of token ids is accepted, and with
``return_tokens_as_token_ids`` and ``logprobs`` each sampled token comes back as ``token_id:<id>`` (the
reply text encoded with the emulator's ``tokenizer``). The matched stop string is kept in the text only
when ``include_stop_str_in_output`` asks for it, as vLLM and OpenAI do.

Example::

    script = [Reply(status=429, retry_after=0.05), Reply(text=PAGE_DOWN), Reply(text=extract("Paris."))]
    with OpenAIEmulator(script).running() as server:
        client = OpenAIChatClient(LLMClientConfig(kind="openai", base_url=server.base_url, model="emu"))
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from deepresearcher.testing._serve import serve_in_thread

PAGE_DOWN = "NOTES: NONE\nCONTINUE: YES"
"""A reader reply: nothing here, read the next chunk."""
STOP = "NOTES: NONE\nCONTINUE: NO"
"""A reader reply: nothing here, stop reading."""
GARBAGE = "As an AI, I think the page is about many things. ~~~ }{ <|endoftext|>"
"""A reply with neither field: the reader must treat it as nothing found, stop."""


def extract(notes: str, read_on: bool = False) -> str:
    """A reader reply carrying ``notes``."""
    return f"NOTES: {notes}\nCONTINUE: {'YES' if read_on else 'NO'}"


@dataclass(frozen=True)
class Reply:
    """One scripted answer: a completion text, or an error status, optionally after a delay."""

    text: str = ""
    status: int = 200
    delay_s: float = 0.0
    retry_after: float | None = None


def chunk_of(body: dict[str, Any]) -> str:
    """The page chunk in a reader prompt (between the ``---`` lines of the last user message)."""
    content = body["messages"][-1]["content"]
    match = re.search(r"\n---\n(.*)\n---\n", content, re.DOTALL)
    return match.group(1) if match else ""


def keyword_reader(keywords: Iterable[str]) -> Callable[[dict[str, Any]], Reply]:
    """A responder that reads like a careful reader: sentences holding a keyword are notes, then stop."""
    words = [k.lower() for k in keywords]

    def respond(body: dict[str, Any]) -> Reply:
        sentences = re.split(r"(?<=[.!?。])\s+", chunk_of(body))
        hits = [s.strip() for s in sentences if any(w in s.lower() for w in words)]
        return Reply(text=extract(" ".join(hits)) if hits else PAGE_DOWN)

    return respond


class OpenAIEmulator:
    """The server; ``requests`` and ``headers`` record every completion request received, in order.

    ``tokenizer`` (anything called as ``tokenizer(text, add_special_tokens=False)["input_ids"]``) is needed
    only to answer completions with token ids.
    """

    def __init__(
        self,
        script: Iterable[Reply] = (),
        responder: Callable[[dict[str, Any]], Reply] | None = None,
        tokenizer: Any = None,
    ) -> None:
        self.script: deque[Reply] = deque(script)
        self.responder = responder or (lambda body: Reply(text=STOP))
        self.tokenizer = tokenizer
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.base_url = ""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        return app

    async def _models(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({"object": "list", "data": [{"id": "emulator", "object": "model"}]})

    async def _next_reply(self, request: web.Request) -> tuple[dict[str, Any], Reply]:
        """Record the request, take its scripted reply and wait the reply's delay."""
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        reply = self.script.popleft() if self.script else self.responder(body)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
        finally:
            self.in_flight -= 1
        return body, reply

    @staticmethod
    def _error(reply: Reply) -> web.StreamResponse:
        headers = {"Retry-After": str(reply.retry_after)} if reply.retry_after is not None else {}
        return web.json_response({"error": {"message": f"scripted {reply.status}"}}, status=reply.status,
                                 headers=headers)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body, reply = await self._next_reply(request)
        if reply.status != 200:
            return self._error(reply)
        text = reply.text
        stop = next((s for s in body.get("stop") or [] if text.endswith(s)), None)
        if stop and not body.get("include_stop_str_in_output"):
            text = text[: -len(stop)]
        choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": "stop", "stop_reason": stop}
        if body.get("return_tokens_as_token_ids") and body.get("logprobs") is not None:
            if self.tokenizer is None:
                return web.json_response({"error": {"message": "the emulator has no tokenizer"}}, status=500)
            ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
            choice["logprobs"] = {"tokens": [f"token_id:{i}" for i in ids], "token_logprobs": [-0.5] * len(ids)}
        return web.json_response({"id": f"cmpl-{len(self.requests)}", "object": "text_completion",
                                  "model": body.get("model", "emulator"), "choices": [choice]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body, reply = await self._next_reply(request)
        if reply.status != 200:
            return self._error(reply)
        prompt_words = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        return web.json_response({
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "model": body.get("model", "emulator"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.text},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_words, "completion_tokens": len(reply.text.split()),
                      "total_tokens": prompt_words + len(reply.text.split())},
        })

    @contextmanager
    def running(self, host: str = "127.0.0.1", port: int = 0) -> Iterator[OpenAIEmulator]:
        """Serve in a background thread with its own event loop; sets :attr:`base_url` (ending in ``/v1``)."""
        with serve_in_thread(self.app(), "openai-emulator", host, port) as url:
            self.base_url = url + "/v1"
            yield self
