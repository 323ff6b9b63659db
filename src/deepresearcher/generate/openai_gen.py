"""A text-only policy behind an OpenAI-compatible API, for evaluation.

``api="completions"``: the prompt ids are decoded with the policy's tokenizer and sent as a plain
completion prompt (the chat template is already in it). ``api="chat"`` (hosted chat-only models): the
decoded ChatML prompt is split back into messages and sent to ``/chat/completions``; the open
assistant turn (``<think>``) is left for the model to write. Either way the reply text is tokenized
back; those ids are *not* what the model sampled, so these trajectories are marked
``exact_tokens = False`` and must not be trained on. Servers drop the stop string from the text; it
is put back when the reply opened the matching tag.

Both this and the vLLM server policy talk through :class:`PolicyServer`: the one model HTTP client
(``inference.http``: retries with backoff on 429, 5xx, timeouts and network errors, so a server's
passing 503 does not fail the rollout), with its errors turned into the ``GenerationError`` a policy raises.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from deepresearcher.errors import BackendError, GenerationError
from deepresearcher.generate.base import GenerationResult, SamplingParams
from deepresearcher.inference.http import OpenAIHttpClient
from deepresearcher.retry import Limits

_OPENERS = {"</tool_call>": "<tool_call>", "</answer>": "<answer>"}
_CHATML_TURN = re.compile(r"<\|im_start\|>(\w+)\n(.*?)(?:<\|im_end\|>\n?|\Z)", re.DOTALL)
_THINK = "<think>"

POLICY_LIMITS = Limits(timeout_s=600.0)
"""The reader's retry policy, but a long timeout: a busy server may take minutes for a 2000-token turn.
No concurrency cap here: the agent loop caps generations in flight (``agent.max_concurrent_generations``)."""


class PolicyServer:
    """An OpenAI-compatible policy server: the shared HTTP client, whose failures become ``GenerationError``."""

    def __init__(self, base_url: str, model: str | None, *, api_key_env: str | None, limits: Limits) -> None:
        self.model = model
        self.http = OpenAIHttpClient(base_url, api_key_env=api_key_env, limits=limits)

    async def model_name(self) -> str:
        """The configured model, else the first one the server lists (asked once)."""
        if self.model is None:
            try:
                self.model = await self.http.first_model()
            except BackendError as exc:
                raise GenerationError(f"Policy server: {exc}; set agent.policy_model to the served name.") from exc
        return self.model

    async def post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self.http.post(path, payload)
        except BackendError as exc:
            raise GenerationError(f"Policy server: {exc}") from exc

    def unexpected(self, body: Any) -> GenerationError:
        """The error for an answer without the fields the policy reads."""
        return GenerationError(f"Policy server {self.http.base_url} answered an unexpected body: {str(body)[:300]}")

    async def aclose(self) -> None:
        await self.http.aclose()


def chatml_messages(prompt: str) -> list[dict[str, str]]:
    """Split a ChatML prompt back into messages, dropping the open assistant turn at the end."""
    messages = [{"role": role, "content": content} for role, content in _CHATML_TURN.findall(prompt)]
    if not messages:
        raise GenerationError("api=chat needs a ChatML prompt (<|im_start|>role ... <|im_end|>); use api=completions.")
    if messages[-1]["role"] == "assistant" and not prompt.rstrip().endswith("<|im_end|>"):
        messages.pop()
    return messages


def restore_stop(text: str, stops: list[str]) -> tuple[str, str | None]:
    """Append the stop string a server cut off, if the text opened its tag and did not close it."""
    for stop in stops:
        opener = _OPENERS.get(stop)
        if opener and text.rfind(opener) > text.rfind(stop):
            return text + stop, stop
    return text, None


class OpenAITextGenerator:
    """Completions from an OpenAI-compatible server; no token ids or logprobs from the model itself."""

    exact_tokens = False

    def __init__(self, base_url: str, tokenizer: Any, model: str | None = None, *, api_key_env: str | None = None,
                 limits: Limits = POLICY_LIMITS, api: Literal["completions", "chat"] = "completions") -> None:
        self.tokenizer = tokenizer
        self.api = api
        self.server = PolicyServer(base_url, model, api_key_env=api_key_env, limits=limits)

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> GenerationResult:
        prompt = self.tokenizer.decode(prompt_ids)
        payload: dict[str, Any] = {
            "model": await self.server.model_name(),
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "stop": params.stop or None,
        }
        if params.seed is not None:
            payload["seed"] = params.seed
        if self.api == "chat":
            payload["messages"] = chatml_messages(prompt)
            body = await self.server.post("/chat/completions", payload)
        else:
            payload["prompt"] = prompt
            body = await self.server.post("/completions", payload)
        try:
            choice = body["choices"][0]
            text = str(choice["message"]["content"] if self.api == "chat" else choice["text"])
        except (KeyError, IndexError, TypeError) as exc:
            raise self.server.unexpected(body) from exc
        if self.api == "chat" and text.lstrip().startswith(_THINK):  # the prompt already opened <think>
            text = text.lstrip()[len(_THINK) :]
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        stop = None
        if finish == "stop":
            text, stop = restore_stop(text, params.stop)
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return GenerationResult(token_ids=ids, logprobs=None, finish_reason=finish,
                                stop_reason=stop or ("eos" if finish == "stop" else None), text=text)

    async def aclose(self) -> None:
        await self.server.aclose()
