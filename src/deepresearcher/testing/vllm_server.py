"""A vLLM OpenAI-compatible completions server on loopback that plays a policy, for CPU tests of ``vllm:`` evals.

It speaks the dialect ``VLLMServerGenerator`` uses: ``POST /v1/completions`` with a token-id ``prompt``,
``return_tokens_as_token_ids`` (each logprob entry is ``token_id:<id>``), ``include_stop_str_in_output`` and
``skip_special_tokens: false``; ``GET /v1/models`` lists the served model. The reply text comes from
``play(prompt_text)``; it is cut after the first requested stop string, as vLLM does, or ends with the EOS
token. ``requests`` records every request body, in order.

Example::

    with VLLMPolicyEmulator(tokenizer, lambda prompt: " done </think>\\n<answer>Paris</answer>").running() as server:
        config = load_config(overrides=[f"agent.policy=vllm:{server.base_url}", "agent.tokenizer=qwen2.5"])
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import web

from deepresearcher.testing._serve import serve_in_thread


class VLLMPolicyEmulator:
    """The server; ``play`` maps the decoded prompt to the policy's reply text."""

    def __init__(self, tokenizer: Any, play: Callable[[str], str], model: str = "policy-emulator") -> None:
        self.tokenizer, self.play, self.model = tokenizer, play, model
        self.requests: list[dict[str, Any]] = []
        self.base_url = ""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/completions", self._complete)
        return app

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.model, "object": "model"}]})

    async def _complete(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        prompt = body.get("prompt")
        if not isinstance(prompt, list) or not body.get("return_tokens_as_token_ids"):
            return web.json_response({"error": {"message": "this emulator takes token-id prompts only"}}, status=400)
        text = self.play(self.tokenizer.decode(prompt, skip_special_tokens=False))
        stop = next((s for s in sorted(body.get("stop") or [], key=text.find) if s in text), None)
        ids = list(self.tokenizer(text[: text.index(stop) + len(stop)] if stop else text,
                                  add_special_tokens=False)["input_ids"])
        if stop is None:
            ids.append(self.tokenizer.eos_token_id)
        ids = ids[: body.get("max_tokens") or len(ids)]
        finish = "stop" if stop is not None or ids[-1:] == [self.tokenizer.eos_token_id] else "length"
        return web.json_response({
            "id": f"cmpl-{len(self.requests)}",
            "object": "text_completion",
            "model": self.model,
            "choices": [{
                "index": 0,
                "text": self.tokenizer.decode(ids, skip_special_tokens=False),
                "logprobs": {"tokens": [f"token_id:{i}" for i in ids], "token_logprobs": [-0.1] * len(ids)},
                "finish_reason": finish,
                "stop_reason": stop,
            }],
        })

    @contextmanager
    def running(self, host: str = "127.0.0.1", port: int = 0) -> Iterator[VLLMPolicyEmulator]:
        """Serve in a background thread; sets :attr:`base_url` (ending in ``/v1``)."""
        with serve_in_thread(self.app(), "vllm-policy-emulator", host, port) as url:
            self.base_url = url + "/v1"
            yield self
