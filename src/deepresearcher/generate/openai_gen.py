"""A text-only policy behind any OpenAI-compatible ``/v1/completions`` endpoint, for evaluation.

The prompt ids are decoded to text with the policy's tokenizer and sent as a plain completion prompt
(the chat template is already in it); the reply text is tokenized back. Those ids are *not* what the
model sampled, so these trajectories are marked ``exact_tokens = False`` and must not be trained on.
Servers drop the stop string from the text; it is put back when the reply opened the matching tag.
Chat-only hosted APIs (no ``/completions``) are not supported.
"""

from __future__ import annotations

from typing import Any

from deepresearcher.errors import GenerationError
from deepresearcher.generate._http import JsonClient
from deepresearcher.generate.base import GenerationResult, SamplingParams

_OPENERS = {"</tool_call>": "<tool_call>", "</answer>": "<answer>"}


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
                 timeout_s: float = 600.0) -> None:
        self.tokenizer = tokenizer
        self.model = model
        self._http = JsonClient(base_url, api_key_env=api_key_env, timeout_s=timeout_s)

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> GenerationResult:
        if self.model is None:
            self.model = await self._http.first_model()
        payload = {
            "model": self.model,
            "prompt": self.tokenizer.decode(prompt_ids),
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "stop": params.stop or None,
        }
        if params.seed is not None:
            payload["seed"] = params.seed
        body = await self._http.request("POST", "/completions", payload)
        try:
            choice = body["choices"][0]
            text = str(choice["text"])
        except (KeyError, IndexError, TypeError) as exc:
            raise GenerationError(f"Server {self._http.base_url} answered an unexpected body: {str(body)[:300]}") from exc
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        stop = None
        if finish == "stop":
            text, stop = restore_stop(text, params.stop)
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return GenerationResult(token_ids=ids, logprobs=None, finish_reason=finish,
                                stop_reason=stop or ("eos" if finish == "stop" else None), text=text)

    async def aclose(self) -> None:
        await self._http.aclose()
