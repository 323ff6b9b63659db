"""A chat client for a model on this machine: the conversation rendered by its chat template, sampled by
the one local engine (``inference.engine``), which batches concurrent requests in its own thread.

Many rollouts ask the reader at the same time; the engine samples their prompts in shared forward
passes and lets requests join a running batch, so the event loop stays free. A conversation that ends
with an assistant message is a prefill: the model continues that message instead of starting one.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from deepresearcher.config import LLMClientConfig
from deepresearcher.errors import ConfigError
from deepresearcher.inference.engine import LocalEngine
from deepresearcher.inference.sampling import SamplingParams
from deepresearcher.llm.base import ChatResult, Message, Usage


def apply_thread_setting(threads: int | None) -> None:
    """Set torch's CPU threads from the config, else from ``$OMP_NUM_THREADS``; leave torch's default otherwise."""
    import torch

    wanted = threads or int(os.environ.get("OMP_NUM_THREADS", "0") or 0)
    if wanted and torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)


class LocalChatClient:
    """Chat over an already loaded causal LM and its tokenizer (which must have a chat template)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        name: str = "local",
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        max_batch: int = 8,
        batch_window_ms: float = 20.0,
        price_prompt_per_1k: float = 0.0,
        price_completion_per_1k: float = 0.0,
    ) -> None:
        if getattr(tokenizer, "chat_template", None) is None:
            raise ConfigError(f"Tokenizer of {name} has no chat template; use an instruct/chat model.")
        self.model = name
        self._tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.engine = LocalEngine(model, tokenizer, max_batch_size=max_batch, batch_wait_s=batch_window_ms / 1000.0)
        self.usage = Usage(price_prompt_per_1k=price_prompt_per_1k, price_completion_per_1k=price_completion_per_1k)

    @property
    def tokenizer(self) -> Any:
        """The model's tokenizer (readers use it to chunk pages by the model's own tokens)."""
        return self._tokenizer

    @classmethod
    def from_config(cls, config: LLMClientConfig, cache_dir: Path | None = None) -> LocalChatClient:
        """A client on ``config.model``: a checkpoint directory, or the embedded SmolLM2 (``smollm2``)."""
        from deepresearcher.inference.loader import load_model

        if not config.model:
            raise ConfigError("`local` client: set `model` to a checkpoint directory (config.json + weights) or "
                              "`smollm2`, or use kind `embedded`.")
        apply_thread_setting(config.threads)
        model, tokenizer = load_model(config.model, cache_dir)
        return cls(
            model, tokenizer, name=Path(config.model).name, max_new_tokens=config.max_new_tokens,
            temperature=config.temperature, max_batch=config.max_batch, batch_window_ms=config.batch_window_ms,
            price_prompt_per_1k=config.price_prompt_per_1k, price_completion_per_1k=config.price_completion_per_1k,
        )

    async def chat(self, messages: list[Message], **sampling: Any) -> ChatResult:
        """The model's reply; concurrent calls share the engine's forward passes."""
        started = time.monotonic()
        prompt = self._render(messages)
        params = SamplingParams(
            max_tokens=int(sampling.get("max_tokens") or self.max_new_tokens),
            temperature=float(sampling.get("temperature", self.temperature) or 0.0),
            top_p=float(sampling.get("top_p") or 1.0),
            stop=list(sampling.get("stop") or []),
        )
        out = await self.engine.generate(prompt, params)
        ids = out.token_ids[:-1] if out.stop_reason == "eos" else out.token_ids
        text = self._tokenizer.decode(ids, skip_special_tokens=True)
        if out.stop_reason not in (None, "eos"):
            text = text[: text.find(out.stop_reason)] if out.stop_reason in text else text
        result = ChatResult(
            text=text.strip(), prompt_tokens=len(prompt), completion_tokens=len(out.token_ids), model=self.model,
            finish_reason=out.finish_reason, latency_s=time.monotonic() - started,
        )
        self.usage.add(result)
        return result

    def _render(self, messages: list[Message]) -> list[int]:
        prefill = bool(messages) and messages[-1]["role"] == "assistant"  # a reply start: the model continues it
        text = self._tokenizer.apply_chat_template(
            messages, tokenize=False, continue_final_message=prefill, add_generation_prompt=not prefill
        )
        return list(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    async def aclose(self) -> None:
        await self.engine.aclose()
