"""An in-process policy generator over a live ``transformers`` model, batching concurrent rollouts.

GRPO samples with the weights being trained, so the generator wraps the trainer's own model object
(no copy, no weight sync). Every rollout of a step calls ``generate`` concurrently; requests that
arrive together are sampled as one left-padded batch with a KV cache, one token per forward pass, and
each row stops on its own (EOS, a stop string, or ``max_tokens``).

Logprobs are ``log_softmax(logits / temperature)`` of the sampled token, exactly what TRL recomputes
for the importance ratio, so at the first micro-step of an on-policy update the ratio is 1.

An episode's next turn starts with everything its last turn saw and sampled, so the generator keeps
each session's keys and values (``SamplingParams.session``) and feeds only the new tokens (the tool's
observation) next time: without it, every turn re-encodes the whole conversation, which was most of a
rollout's time. The cache lives as long as the generator (one training step) and is bounded in bytes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from deepresearcher.generate.base import GenerationResult, SamplingParams
from deepresearcher.generate.batching import BatchingGenerator, Request

logger = logging.getLogger(__name__)


@dataclass
class _Prefix:
    """The keys and values of a session's tokens ``ids``: one ``(keys, values)`` pair per layer, [heads, len, dim]."""

    ids: list[int]
    layers: list[tuple[Any, Any]]
    nbytes: int


class LocalBatchedGenerator(BatchingGenerator):
    """``Generator`` protocol over a loaded causal LM; safe for many concurrent ``generate`` calls on one loop."""

    def __init__(self, model: Any, tokenizer: Any, *, max_batch: int = 256, seed: int = 0, settle_yields: int = 3,
                 kv_cache_bytes: int = 1 << 30) -> None:
        import torch

        super().__init__(max_batch=max_batch, settle_yields=settle_yields)
        self.model = model
        self.kv_cache_bytes = kv_cache_bytes
        self._prefixes: dict[int, _Prefix] = {}
        self._cached_bytes = 0
        self.tokenizer = tokenizer
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        eos = tokenizer.eos_token_id
        self.eos_ids = {eos} if isinstance(eos, int) else set(eos or [])
        self._rng = torch.Generator().manual_seed(seed)
        self.sampled_tokens = 0
        self.prefill_tokens = 0  # tokens encoded before sampling
        self.reused_tokens = 0  # tokens whose keys and values came from a session's cache instead

    def _sample(self, batch: list[Request]) -> list[GenerationResult]:
        import torch

        device = next(self.model.parameters()).device
        rows = len(batch)
        hits = [self._take_prefix(r) for r in batch]
        cached = [len(h.ids) if h else 0 for h in hits]
        fresh = [r.prompt_ids[c:] for r, c in zip(batch, cached, strict=True)]
        # Layout per row: [pad][cached keys/values][pad][new tokens]; positions continue each row's own count.
        width_cached, width = max(cached), max(len(f) for f in fresh)
        ids = torch.full((rows, width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((rows, width_cached + width), dtype=torch.long)
        positions = torch.zeros((rows, width), dtype=torch.long)
        for i, (c, new) in enumerate(zip(cached, fresh, strict=True)):
            ids[i, width - len(new) :] = torch.tensor(new)
            attention[i, width_cached - c : width_cached] = 1
            attention[i, width_cached + width - len(new) :] = 1
            positions[i, width - len(new) :] = torch.arange(c, c + len(new))
        self.prefill_tokens += sum(len(f) for f in fresh)
        self.reused_tokens += sum(cached)
        temperature = torch.tensor([max(r.params.temperature, 1e-6) for r in batch]).unsqueeze(1)
        greedy = torch.tensor([r.params.temperature == 0 for r in batch])
        limits = [r.params.max_tokens for r in batch]
        out_ids: list[list[int]] = [[] for _ in batch]
        out_lp: list[list[float]] = [[] for _ in batch]
        finish: list[tuple[str, str | None] | None] = [None] * rows
        ids, attention, positions = ids.to(device), attention.to(device), positions.to(device)
        rows_of = list(range(rows))  # batch position -> request index; finished rows are dropped as they stop
        with torch.inference_mode():
            past = self._batch_cache(hits, cached, width_cached, device)
            out = self.model(input_ids=ids, attention_mask=attention, position_ids=positions, past_key_values=past,
                             use_cache=True, logits_to_keep=1)  # the prompt's other logits are never used
            past, logits = out.past_key_values, out.logits[:, -1].float().cpu()
            last_pos = positions[:, -1]
            for _ in range(max(limits)):
                logp = torch.log_softmax(logits / temperature, dim=-1)
                sampled = torch.where(greedy, logits.argmax(-1), self._draw(logp))
                chosen = logp.gather(1, sampled.unsqueeze(1)).squeeze(1)
                for pos, i in enumerate(rows_of):
                    token = int(sampled[pos])
                    out_ids[i].append(token)
                    out_lp[i].append(float(chosen[pos]))
                    finish[i] = self._stopped(out_ids[i], batch[i].params, limits[i])
                keep = [pos for pos, i in enumerate(rows_of) if finish[i] is None]
                for pos, i in enumerate(rows_of):
                    if finish[i] is not None:
                        self._keep_prefix(batch[i], out_ids[i], past, pos, attention[pos])
                if not keep:
                    break
                if len(keep) < len(rows_of):  # compact: finished rows stop costing compute
                    index = torch.tensor(keep)
                    past.reorder_cache(index.to(device))
                    rows_of = [rows_of[pos] for pos in keep]
                    sampled, attention, last_pos = sampled[index], attention[index.to(device)], last_pos[index.to(device)]
                    temperature, greedy = temperature[index], greedy[index]
                step_ids = sampled.to(device).unsqueeze(1)
                attention = torch.cat([attention, torch.ones((len(rows_of), 1), dtype=attention.dtype, device=device)], 1)
                last_pos = last_pos + 1
                out = self.model(
                    input_ids=step_ids,
                    attention_mask=attention,
                    position_ids=last_pos.unsqueeze(1),
                    past_key_values=past,
                    use_cache=True,
                )
                past, logits = out.past_key_values, out.logits[:, -1].float().cpu()
        self.sampled_tokens += sum(len(x) for x in out_ids)
        return [
            GenerationResult(token_ids=t, logprobs=lp, finish_reason=f[0], stop_reason=f[1])  # type: ignore[index,arg-type]
            for t, lp, f in zip(out_ids, out_lp, finish, strict=True)
        ]

    def _take_prefix(self, request: Request) -> _Prefix | None:
        """The cached prefix of this request's session, if its ids start this prompt (it is used up either way)."""
        session = request.params.session
        prefix = self._prefixes.pop(session, None) if session is not None else None
        if prefix is None:
            return None
        self._cached_bytes -= prefix.nbytes
        n = len(prefix.ids)
        return prefix if n < len(request.prompt_ids) and request.prompt_ids[:n] == prefix.ids else None

    def _keep_prefix(self, request: Request, sampled: list[int], past: Any, row: int, attention_row: Any) -> None:
        """Store a finished row's keys and values (prompt + sampled ids but the last, which was never fed)."""
        if request.params.session is None:
            return
        slots = attention_row.nonzero().squeeze(1)
        per_slot = sum(layer.keys[row, :, 0].nbytes + layer.values[row, :, 0].nbytes for layer in past.layers)
        nbytes = per_slot * len(slots)
        if self._cached_bytes + nbytes > self.kv_cache_bytes:  # over budget: copy nothing
            return
        layers = [(layer.keys[row][:, slots].clone(), layer.values[row][:, slots].clone()) for layer in past.layers]
        self._prefixes[request.params.session] = _Prefix(request.prompt_ids + sampled[:-1], layers, nbytes)
        self._cached_bytes += nbytes

    def _batch_cache(self, hits: list[_Prefix | None], cached: list[int], width: int, device: Any) -> Any:
        """A ``DynamicCache`` holding each row's cached keys and values, left-padded to ``width``; None if empty."""
        import torch
        from transformers import DynamicCache

        if width == 0:
            return None
        first = next(h for h in hits if h)
        layers = []
        for layer in range(len(first.layers)):
            first_keys = first.layers[layer][0]
            heads, dim = first_keys.shape[0], first_keys.shape[2]
            keys = torch.zeros((len(hits), heads, width, dim), dtype=first_keys.dtype, device=device)
            values = torch.zeros_like(keys)
            for i, (hit, c) in enumerate(zip(hits, cached, strict=True)):
                if hit:
                    keys[i, :, width - c :] = hit.layers[layer][0]
                    values[i, :, width - c :] = hit.layers[layer][1]
            layers.append((keys, values))
        return DynamicCache(ddp_cache_data=layers, config=self.model.config)

    def _draw(self, logp: Any) -> Any:
        """One token per row from ``exp(logp)`` by inverse CDF: exact, and ~10x faster than ``torch.multinomial``
        over a whole vocabulary on CPU (one uniform per row instead of a pass that draws per category)."""
        import torch

        cdf = logp.exp().cumsum(-1)
        u = torch.rand((cdf.shape[0], 1), generator=self._rng) * cdf[:, -1:]
        return torch.searchsorted(cdf, u).squeeze(1).clamp(max=cdf.shape[1] - 1)

    def _stopped(self, ids: list[int], params: SamplingParams, limit: int) -> tuple[str, str | None] | None:
        if ids[-1] in self.eos_ids:
            return ("stop", "eos")
        if params.stop:
            tail = self.tokenizer.decode(ids[-12:], skip_special_tokens=False)
            for stop in params.stop:
                if tail.endswith(stop):
                    return ("stop", stop)
        if len(ids) >= limit:
            return ("length", None)
        return None
