"""A chat client for a transformers model on this machine that batches concurrent requests.

Many rollouts ask the reader at the same time; generating their prompts one by one wastes the
matrix units. Requests wait up to ``batch_window_ms`` for company, are left-padded into one batch
(up to ``max_batch``) and generated together in a worker thread, so the event loop stays free.
Requests with different sampling settings are generated in separate batches. A conversation that
ends with an assistant message is a prefill: the model continues that message instead of starting one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepresearcher.config import LLMClientConfig
from deepresearcher.errors import ConfigError
from deepresearcher.llm.base import ChatResult, Message, Usage

logger = logging.getLogger(__name__)


def apply_thread_setting(threads: int | None) -> None:
    """Set torch's CPU threads from the config, else from ``$OMP_NUM_THREADS``; leave torch's default otherwise."""
    import torch

    wanted = threads or int(os.environ.get("OMP_NUM_THREADS", "0") or 0)
    if wanted and torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)


@dataclass
class _Pending:
    messages: list[Message]
    sampling: tuple[int, float, float]
    future: asyncio.Future[ChatResult]
    enqueued: float = field(default_factory=time.monotonic)


class LocalChatClient:
    """Batched generation with an already loaded causal LM and its tokenizer (which must have a chat template)."""

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
        self._lm = model
        self._tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.max_batch = max_batch
        self.batch_window_s = batch_window_ms / 1000.0
        self.usage = Usage(price_prompt_per_1k=price_prompt_per_1k, price_completion_per_1k=price_completion_per_1k)
        self.batches = 0
        """Number of ``generate`` calls so far; fewer than ``usage.requests`` means requests were batched."""
        self._queue: asyncio.Queue[_Pending] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def tokenizer(self) -> Any:
        """The model's tokenizer (readers use it to chunk pages by the model's own tokens)."""
        return self._tokenizer

    @classmethod
    def from_config(cls, config: LLMClientConfig) -> LocalChatClient:
        """Load ``config.model`` (a directory with a transformers model) on the CPU or the first GPU."""
        path = Path(config.model).expanduser()
        if not config.model or not path.is_dir():
            raise ConfigError(
                f"`local` client: model {config.model!r} is not a directory; point `model` at a saved "
                "transformers model (config.json + weights) or use kind `embedded`."
            )
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        apply_thread_setting(config.threads)
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        model.eval()
        return cls(
            model, tokenizer, name=path.name, max_new_tokens=config.max_new_tokens, temperature=config.temperature,
            max_batch=config.max_batch, batch_window_ms=config.batch_window_ms,
            price_prompt_per_1k=config.price_prompt_per_1k, price_completion_per_1k=config.price_completion_per_1k,
        )

    async def chat(self, messages: list[Message], **sampling: Any) -> ChatResult:
        """Queue one request; it is generated with whatever else arrives within the batch window."""
        self._ensure_worker()
        assert self._queue is not None
        key = (
            int(sampling.get("max_tokens") or self.max_new_tokens),
            float(sampling.get("temperature", self.temperature) or 0.0),
            float(sampling.get("top_p") or 1.0),
        )
        future: asyncio.Future[ChatResult] = asyncio.get_running_loop().create_future()
        await self._queue.put(_Pending(messages, key, future))
        result = await future
        self.usage.add(result)
        return result

    async def aclose(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except (asyncio.CancelledError, RuntimeError):
                pass
        self._worker = self._queue = self._loop = None

    def _ensure_worker(self) -> None:
        """Start the batching task on the running loop (again, if an earlier loop has gone)."""
        loop = asyncio.get_running_loop()
        if self._worker is None or self._loop is not loop or self._worker.done():
            self._queue = asyncio.Queue()
            self._loop = loop
            self._worker = loop.create_task(self._run(), name=f"batcher:{self.model}")

    async def _run(self) -> None:
        assert self._queue is not None
        queue = self._queue
        while True:
            batch = [await queue.get()]
            deadline = time.monotonic() + self.batch_window_s
            while len(batch) < self.max_batch:
                timeout = deadline - time.monotonic()
                if timeout <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(queue.get(), timeout))
                except asyncio.TimeoutError:
                    break
            groups: dict[tuple[int, float, float], list[_Pending]] = {}
            for item in batch:
                groups.setdefault(item.sampling, []).append(item)
            for key, items in groups.items():
                live = [item for item in items if not item.future.cancelled()]
                if not live:
                    continue
                try:
                    results = await asyncio.to_thread(self._generate, [i.messages for i in live], *key)
                except Exception as exc:  # surface the failure to every waiting caller
                    logger.exception("generation failed for a batch of %d", len(live))
                    for item in live:
                        if not item.future.done():
                            item.future.set_exception(exc)
                    continue
                for item, result in zip(live, results):
                    if not item.future.done():
                        item.future.set_result(result)

    def _generate(
        self, conversations: list[list[Message]], max_new_tokens: int, temperature: float, top_p: float
    ) -> list[ChatResult]:
        """Left-pad the prompts, generate them together, and cut each reply at its end-of-sequence."""
        import torch

        started = time.monotonic()
        tok = self._tokenizer
        prompts = [
            tok.apply_chat_template(m, continue_final_message=True, tokenize=False)
            if m and m[-1]["role"] == "assistant"  # a prefilled reply start: the model continues it
            else tok.apply_chat_template(m, add_generation_prompt=True, tokenize=False)
            for m in conversations
        ]
        pad_side, tok.padding_side = tok.padding_side, "left"
        try:
            if tok.pad_token_id is None:
                tok.pad_token = tok.eos_token
            enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        finally:
            tok.padding_side = pad_side
        enc = enc.to(self._lm.device)
        kwargs: dict[str, Any] = {"max_new_tokens": max_new_tokens, "pad_token_id": tok.pad_token_id}
        if temperature > 0:
            kwargs.update(do_sample=True, temperature=temperature, top_p=top_p)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        with torch.inference_mode():
            out = self._lm.generate(**enc, **kwargs)
        self.batches += 1
        new = out[:, enc["input_ids"].shape[1]:]
        eos = set(_as_list(self._lm.generation_config.eos_token_id)) | {tok.eos_token_id}
        latency = time.monotonic() - started
        results = []
        for row, mask in zip(new.tolist(), enc["attention_mask"]):
            cut = next((i for i, t in enumerate(row) if t in eos), None)
            ids = row if cut is None else row[:cut]
            results.append(
                ChatResult(
                    text=tok.decode(ids, skip_special_tokens=True).strip(),
                    prompt_tokens=int(mask.sum()),
                    completion_tokens=len(ids) + (0 if cut is None else 1),
                    model=self.model,
                    finish_reason="length" if cut is None else "stop",
                    latency_s=latency,
                )
            )
        logger.debug("generated a batch of %d in %.2fs", len(results), latency)
        return results


def _as_list(value: Any) -> list[int]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [int(value)]
