"""A text-only policy behind an OpenAI-compatible API, for evaluation.

``api="completions"``: the prompt ids are decoded with the policy's tokenizer and sent as a plain
completion prompt (the chat template is already in it). ``api="chat"`` (hosted chat-only models): the
decoded ChatML prompt is split back into messages and sent to ``/chat/completions``; the open
assistant turn (``<think>``) is left for the model to write. Either way the reply text is tokenized
back; those ids are *not* what the model sampled, so these trajectories are marked
``exact_tokens = False`` and must not be trained on. Servers drop the stop string from the text; it
is put back when the reply opened the matching tag.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from deepresearcher.errors import GenerationError
from deepresearcher.generate._http import JsonClient
from deepresearcher.generate.base import GenerationResult, SamplingParams

_OPENERS = {"</tool_call>": "<tool_call>", "</answer>": "<answer>"}
_CHATML_TURN = re.compile(r"<\|im_start\|>(\w+)\n(.*?)(?:<\|im_end\|>\n?|\Z)", re.DOTALL)
_THINK = "<think>"


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
                 timeout_s: float = 600.0, api: Literal["completions", "chat"] = "completions") -> None:
        self.tokenizer = tokenizer
        self.model = model
        self.api = api
        self._http = JsonClient(base_url, api_key_env=api_key_env, timeout_s=timeout_s)

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> GenerationResult:
        if self.model is None:
            self.model = await self._http.first_model()
        prompt = self.tokenizer.decode(prompt_ids)
        payload: dict[str, Any] = {
            "model": self.model,
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "stop": params.stop or None,
        }
        if params.seed is not None:
            payload["seed"] = params.seed
        if self.api == "chat":
            payload["messages"] = chatml_messages(prompt)
            body = await self._http.request("POST", "/chat/completions", payload)
        else:
            payload["prompt"] = prompt
            body = await self._http.request("POST", "/completions", payload)
        try:
            choice = body["choices"][0]
            text = str(choice["message"]["content"] if self.api == "chat" else choice["text"])
        except (KeyError, IndexError, TypeError) as exc:
            raise GenerationError(f"Server {self._http.base_url} answered an unexpected body: {str(body)[:300]}") from exc
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
        await self._http.aclose()
