"""The one local generation engine: a causal LM on this machine behind an async ``generate``.

Every local caller uses it: the policy in ``research`` and ``eval``, GRPO rollouts with the trainer's
live weights, and the local reader/judge chat clients. One decode thread owns the model and a running
batch, so the event loop never waits on a forward pass:

- **continuous admission**: requests that arrive while the batch decodes join it (prefilled together,
  left-padded, their KV cache merged into the running one), up to ``max_batch_size`` rows. Newcomers
  join once as many wait as rows run, or after ``join_every`` decode steps, so the episodes that come
  back from their tool calls one by one share one prefill instead of paying a forward pass each (a
  training step, whose rows return together, passes a turn's length and decodes in near rounds; on
  the CPU a tiny model's extra forward passes cost more than the wait); from idle, and when a batch has
  drained, the thread waits ``batch_wait_s`` so simultaneous requests share one prefill. Each row leaves the batch the step
  it finishes, so a short turn never waits for a long one;
- **KV cache across turns**: a request with ``SamplingParams.session`` reuses the keys and values of
  that session's last prompt + sampled ids as far as its prompt shares their start, and encodes only the
  rest (an episode's next turn encodes only the tool's observation; a protocol that re-renders the last
  turn, as the original DeepResearcher's did, encodes from the first token the rendering changed). Kept
  sessions are bounded in bytes;
- **sampling per row**: temperature, top-p, stop strings, ``max_tokens``; greedy rows (temperature 0)
  take the argmax. Each row draws from its own random stream, seeded by the engine's seed, the request's
  ``seed`` and ``session`` and its prompt length, so what a request samples does not depend on which
  other requests happened to share its batch (admission follows the clock; the samples must not);
- **token constraints**: a request's ``SamplingParams.constraint`` masks each step's logits to the tokens it
  allows (guided decoding of an untrained model, ``agent.guide``); unconstrained rows are untouched;
- **context guard**: a prompt that does not fit the model's positions is refused with the setting to
  change, and no row samples past them;
- **static cache and CUDA graphs**: with ``static_cache`` on, the running batch's keys and values live in
  static per-slot buffers and each decode step writes one column per row (``inference.static_decode``);
  with ``cuda_graphs`` on (the default for a model on a CUDA GPU, where it turns ``static_cache`` on too)
  that step is replayed as a CUDA graph. On the CPU both are off by default and the batch decodes over a
  left-padded ``DynamicCache`` whose columns are trimmed and merged; ``static_cache=True`` runs the static
  step eagerly there (what the tests compare against the dynamic path). Prefill is eager either way, and a
  batch whose rows do not fit the static buffers' byte budget decodes over a ``DynamicCache`` until they
  do. Graphs read the weights where they were at capture: whoever swaps weights between steps (holding
  ``weights_lock``) copies them in place, as ``train.async_worker.EngineWeightTransfer`` does (a moved
  parameter is noticed and the graphs are captured anew).

Logprobs are ``log_softmax(logits / temperature)`` of the sampled token (before top-p), what the GRPO
ratio compares against, since the trainer scores at the same temperature; greedy rows report the plain
log-softmax.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import itertools
import logging
import queue
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from deepresearcher.errors import GenerationError
from deepresearcher.inference.sampling import GenerationResult, SamplingParams

if TYPE_CHECKING:
    from deepresearcher.inference.static_decode import StaticDecoder

logger = logging.getLogger(__name__)

T = TypeVar("T")

_STOP_TAIL_TOKENS = 12
"""Sampled tokens decoded to look for a stop string: enough for the longest protocol tag."""


@dataclass
class _Prefix:
    """A finished session's keys and values for ``ids``: one ``(keys, values)`` pair per layer, [heads, len, dim]."""

    ids: list[int]
    layers: list[tuple[Any, Any]]
    nbytes: int


@dataclass
class _Row:
    """One request in (or on its way into) the running batch."""

    prompt: list[int]
    params: SamplingParams
    future: asyncio.Future[GenerationResult]
    loop: asyncio.AbstractEventLoop
    limit: int
    rng: random.Random
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
    """The running batch: rows, their KV cache, attention mask, next input token and position.

    ``static``: the rows' keys and values are in the engine's static buffers, row ``i`` in slot ``i`` holding
    ``positions[i]`` tokens (``cache`` and ``attention`` are None); else ``cache`` is a left-padded
    ``DynamicCache`` and ``attention`` marks each row's columns.
    """

    rows: list[_Row]
    cache: Any
    attention: Any
    tokens: Any
    positions: Any
    static: bool = False


class LocalEngine:
    """A loaded causal LM behind the async ``Generator`` interface; safe for many concurrent callers."""

    exact_tokens = True
    supports_constraints = True
    """Honours ``SamplingParams.constraint`` (guided decoding, ``agent.guide``)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_batch_size: int = 16,
        batch_wait_s: float = 0.005,
        seed: int = 0,
        kv_cache_bytes: int = 1 << 30,
        join_every: int = 8,
        cuda_graphs: bool | None = None,
        static_cache: bool | None = None,
        static_cache_bytes: int | None = None,
    ) -> None:
        """``cuda_graphs``: replay decode steps as CUDA graphs (None: on for a model on a CUDA GPU; needs one).
        ``static_cache``: decode over static key/value buffers (None: as ``cuda_graphs``). ``static_cache_bytes``
        bounds those buffers (None: a quarter of the GPU's memory, 1 GiB on the CPU); a batch that does not fit
        decodes over a ``DynamicCache``. ``kv_cache_bytes`` bounds the sessions' kept keys and values."""
        self.model = model
        self.join_every = join_every
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.batch_wait_s = batch_wait_s
        self.kv_cache_bytes = kv_cache_bytes
        self.max_context = int(getattr(model.config, "max_position_embeddings", 0) or 0) or None
        # transformers 5.2x renamed the forward's ``past_key_values`` to ``cache``; older releases know only the first.
        forward = inspect.signature(model.forward).parameters if callable(getattr(model, "forward", None)) else {}
        self._cache_arg = "cache" if "cache" in forward else "past_key_values"
        self.device = next(model.parameters()).device
        self.seed = seed
        self._unkeyed = itertools.count()  # streams of requests with neither seed nor session, in arrival order
        eos = tokenizer.eos_token_id
        self._eos_ids = {eos} if isinstance(eos, int) else set(eos or [])
        pad = tokenizer.pad_token_id
        self._pad_id = pad if pad is not None else next(iter(self._eos_ids), 0)
        self._pending: queue.SimpleQueue[_Row] = queue.SimpleQueue()
        self._state = threading.Lock()
        self.weights_lock = threading.Lock()
        """Held during every forward pass: whoever holds it (``train.async_worker.EngineWeightTransfer``) may
        replace the model's weights between two decode steps while rows keep their place in the batch."""
        self._thread: threading.Thread | None = None
        self._driven = False  # a caller's thread decodes (``run_driving``) instead of a thread of our own
        self._wake = threading.Event()
        self._closed = False
        self._prefixes: dict[int, _Prefix] = {}
        self._cached_bytes = 0
        self.batches: list[int] = []
        """Rows admitted by each prefill (one entry per admission), for tests and benchmarks."""
        self.joined = 0
        """Rows that joined a batch already decoding (continuous admission at work)."""
        self.prefill_tokens = 0
        """Prompt tokens encoded."""
        self.reused_tokens = 0
        """Prompt tokens whose keys and values came from a session's cache instead."""
        self.sampled_tokens = 0
        self.decode_steps = 0
        """Decode steps run (after each admission's prefill)."""
        self.static_steps = 0
        """Of those, the steps run over the static cache (the rest over a ``DynamicCache``)."""
        self._static = self._static_decoder(cuda_graphs, static_cache, static_cache_bytes)

    @property
    def cuda_graphs(self) -> bool:
        """Whether decode steps are replayed as CUDA graphs (until a capture fails: then eagerly, logged)."""
        return self._static is not None and self._static.graphs

    def _static_decoder(self, cuda_graphs: bool | None, static_cache: bool | None,
                        budget: int | None) -> StaticDecoder | None:
        """The static-cache decoder the flags ask for (``__init__``), or None for the dynamic path."""
        on_cuda = self.device.type == "cuda"
        graphs = on_cuda if cuda_graphs is None else cuda_graphs
        if graphs and not on_cuda:
            raise GenerationError(f"cuda_graphs=True needs a model on a CUDA GPU; this one is on {self.device}.")
        static = graphs if static_cache is None else static_cache
        if graphs and not static:
            raise GenerationError("cuda_graphs=True replays the static-cache decode step; "
                                  "static_cache=False turns it off.")
        if not static:
            return None
        from deepresearcher.inference.static_decode import StaticDecoder, supports_static_decode

        why_not = supports_static_decode(self.model)
        if why_not is not None:
            logger.warning("decoding over a dynamic KV cache, not the static one: %s", why_not)
            return None
        if budget is None:
            import torch

            budget = torch.cuda.get_device_properties(self.device).total_memory // 4 if on_cuda else 1 << 30
        return StaticDecoder(self.model, max_rows=self.max_batch_size, max_columns=self.max_context,
                             budget_bytes=budget, graphs=graphs, cache_arg=self._cache_arg)

    @classmethod
    def from_pretrained(cls, path: str | Path, **kwargs: Any) -> LocalEngine:
        """A checkpoint directory (model + tokenizer), float32 on CPU or bfloat16 on a GPU."""
        from deepresearcher.inference.loader import load_checkpoint

        model, tokenizer = load_checkpoint(path)
        return cls(model, tokenizer, **kwargs)

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
        row = _Row(prompt=list(prompt_ids), params=params, future=loop.create_future(), loop=loop,
                   limit=max(1, min(params.max_tokens, room)), rng=self._stream(params, len(prompt_ids)))
        with self._state:
            self._pending.put(row)
            if self._driven:
                self._wake.set()
            elif self._thread is None:
                self._start_thread()
        return await row.future

    def _start_thread(self) -> None:
        self._thread = threading.Thread(target=self._decode_loop, name="dr-engine", daemon=True)
        self._thread.start()

    def run_driving(self, loop: asyncio.AbstractEventLoop, main: Coroutine[Any, Any, T]) -> T:
        """Run ``main`` on ``loop`` in a helper thread while the calling thread decodes; return its result.

        Why: on the CPU torch's OpenMP worker team belongs to the thread that calls into torch. A trainer
        that leaves decoding to a thread of its own keeps two teams on the same cores, and right after the
        trainer's backward pass the idle team still spins, slowing the decode thread's. Decoding on the
        trainer's own thread reuses its team, as the trainer's forward and backward passes do. The event
        loop (the agent's turns and tool calls) is light Python, so it loses nothing on a helper thread.
        """
        done: concurrent.futures.Future[T] = concurrent.futures.Future()
        task: asyncio.Future[T] | None = None
        started = threading.Event()

        def run_loop() -> None:
            nonlocal task
            try:
                task = asyncio.ensure_future(main, loop=loop)
                started.set()
                done.set_result(loop.run_until_complete(task))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                done.set_exception(exc)
            finally:
                started.set()

        done.add_done_callback(lambda _: self._wake.set())
        with self._state:
            self._driven = True
            running = self._thread
        if running is not None:  # a decode thread still finishing: it hands over once its batch drains
            running.join()
        helper = threading.Thread(target=run_loop, name="dr-rollouts", daemon=True)
        helper.start()
        try:
            while not done.done():
                self._wake.wait()
                self._wake.clear()
                if not self._pending.empty():
                    self._decode(driven=True)
        except BaseException:
            started.wait()
            if task is not None:
                loop.call_soon_threadsafe(task.cancel)
            raise
        finally:
            helper.join()
            with self._state:
                self._driven = False
                if not self._pending.empty() and self._thread is None:
                    self._start_thread()
        return done.result()

    def _stream(self, params: SamplingParams, prompt_tokens: int) -> random.Random:
        """The request's own random stream: the same request (seed, session, turn) draws the same numbers."""
        if params.seed is None and params.session is None:
            return random.Random(f"{self.seed}/unkeyed/{next(self._unkeyed)}")
        return random.Random(f"{self.seed}/{params.seed}/{params.session}/{prompt_tokens}")

    async def aclose(self) -> None:
        """Stop accepting requests and wait for the running ones to finish; kept sessions are dropped."""
        self._closed = True
        thread = self._thread
        if thread is not None:
            await asyncio.to_thread(thread.join)
        self._prefixes.clear()
        self._cached_bytes = 0
        if self._static is not None:
            self._static.release()

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
        self._decode(driven=False)

    def _decode(self, *, driven: bool) -> None:
        """Admit and decode until no row runs and none waits (then the decode thread, if that is us, ends)."""
        import torch

        batch: _Batch | None = None
        newcomers: list[_Row] = []
        waited = 0  # decode steps since a request was first seen waiting beside a running batch
        time.sleep(self.batch_wait_s)  # from idle: let simultaneous requests share the first prefill
        try:
            with torch.inference_mode():
                was_active = False
                while True:
                    active = len(batch.rows) if batch else 0
                    if was_active and not active:  # drained: requests arriving together share the next prefill
                        time.sleep(self.batch_wait_s)
                    was_active = bool(active)
                    waiting = not self._pending.empty()
                    waited = waited + 1 if waiting and active else 0
                    if not active or waited > self.join_every or (waiting and self._pending.qsize() >= active):
                        newcomers = self._take_pending(self.max_batch_size - active)
                        if newcomers:
                            with self.weights_lock:
                                batch = self._admit(batch, newcomers)
                        waited = 0
                    if batch is None or not batch.rows:
                        with self._state:
                            if self._pending.empty():
                                if not driven:
                                    self._thread = None
                                return
                        batch = None
                        continue
                    with self.weights_lock:
                        batch = self._step(batch)
        except Exception as exc:  # a model failure fails every waiting request, loudly
            logger.exception("local generation failed")
            error = GenerationError(f"local generation failed: {exc!r}")
            # Under the lock generate() enqueues with: a caller that sees its failure and asks again finds this
            # thread gone (and starts a new one) rather than landing in the pending queue drained just below.
            with self._state:
                for row in (batch.rows if batch else []) + newcomers + self._take_pending(1 << 30):
                    row.deliver(error)  # rows already answered are skipped
                if not driven:
                    self._thread = None

    def _sample(self, logits: Any, rows: list[_Row]) -> tuple[Any, Any]:
        """One token per row with its own temperature and top-p; the logprob of each under its temperature.

        Draws by inverse CDF with one uniform from each row's own stream: exact, and far faster on the CPU
        than ``torch.multinomial`` over a whole vocabulary. The vocabulary is sorted only when a row asks for
        top-p.
        """
        import torch

        logits = _constrain(logits.float(), rows)
        device = logits.device
        temperature = torch.tensor([r.params.temperature for r in rows], device=device).unsqueeze(-1)
        greedy = temperature.squeeze(-1) == 0
        logp = torch.log_softmax(logits / torch.where(greedy.unsqueeze(-1), torch.ones_like(temperature), temperature), -1)
        probs = logp.exp()
        top_p = [r.params.top_p for r in rows]
        order = None
        if any(p < 1.0 for p in top_p):
            probs, order = probs.sort(dim=-1, descending=True)
            mass = torch.tensor(top_p, device=device).unsqueeze(-1)
            probs = probs.masked_fill((probs.cumsum(-1) - probs) >= mass, 0.0)  # the nucleus keeps its first token
        cdf = probs.cumsum(-1)
        uniform = torch.tensor([[row.rng.random()] for row in rows], device=device, dtype=cdf.dtype) * cdf[:, -1:]
        drawn = torch.searchsorted(cdf, uniform).clamp(max=cdf.shape[-1] - 1)
        drawn = (order.gather(-1, drawn) if order is not None else drawn).squeeze(-1)
        tokens = torch.where(greedy, logits.argmax(-1), drawn)
        return tokens, logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)

    def _record(self, batch: _Batch, tokens: Any, logprobs: Any) -> list[int]:
        """Append each row's token; deliver finished rows (keeping their session); return the rows still running.

        ``batch.cache`` holds the keys and values of every token fed so far, which for a finished row is its
        prompt and all it sampled but the last token; ``batch.attention`` marks that row's columns.
        """
        keep = []
        for i, (row, token, logprob) in enumerate(zip(batch.rows, tokens.tolist(), logprobs.tolist())):
            row.sampled.append(token)
            row.logprobs.append(logprob)
            finish = self._finished(row)
            if finish is None:
                keep.append(i)
                continue
            self.sampled_tokens += len(row.sampled)
            self._keep_prefix(row, batch, i)
            row.deliver(GenerationResult(token_ids=row.sampled, logprobs=row.logprobs,
                                         finish_reason=finish[0], stop_reason=finish[1]))  # type: ignore[arg-type]
        return keep

    def _admit(self, batch: _Batch | None, rows: list[_Row]) -> _Batch | None:
        """Prefill newcomers together (each after its session's cached tokens) and merge them into the batch.

        Layout per newcomer row: ``[pad][cached keys/values][pad][new tokens]``; positions count only the
        row's own tokens, so the gaps change nothing. Prefill is eager; :meth:`_join` then moves the rows
        into the static cache when they fit it.
        """
        import torch

        from deepresearcher.inference.kv_cache import make_roomy

        self.batches.append(len(rows))
        device = self.device
        hits = [self._take_prefix(row) for row in rows]
        cached = [len(hit.ids) if hit else 0 for hit in hits]
        fresh = [row.prompt[c:] for row, c in zip(rows, cached, strict=True)]
        width_cached, width = max(cached), max(len(f) for f in fresh)
        ids = torch.full((len(rows), width), self._pad_id, dtype=torch.long, device=device)
        attention = torch.zeros((len(rows), width_cached + width), dtype=torch.long, device=device)
        for i, (c, new) in enumerate(zip(cached, fresh, strict=True)):
            ids[i, width - len(new) :] = torch.tensor(new, device=device)
            attention[i, width_cached - c : width_cached] = 1
            attention[i, width_cached + width - len(new) :] = 1
        positions = (attention.cumsum(-1) - 1).clamp(min=0)[:, width_cached:]
        self.prefill_tokens += sum(len(f) for f in fresh)
        self.reused_tokens += sum(cached)
        out = self.model(input_ids=ids, attention_mask=attention, position_ids=positions, use_cache=True,
                         logits_to_keep=1, **{self._cache_arg: self._cache_of(hits, cached, width_cached)})
        tokens, logprobs = self._sample(out.logits[:, -1, :], rows)
        fresh_batch = _Batch(rows=rows, cache=make_roomy(getattr(out, self._cache_arg)), attention=attention,
                             tokens=tokens, positions=positions[:, -1] + 1)
        fresh_batch = self._select(fresh_batch, self._record(fresh_batch, tokens, logprobs))
        if not fresh_batch.rows:
            return batch
        if batch is not None and batch.rows:
            self.joined += len(fresh_batch.rows)
        return self._join(batch if batch is not None and batch.rows else None, fresh_batch)

    def _join(self, batch: _Batch | None, fresh: _Batch) -> _Batch:
        """The running batch (if any) with the freshly prefilled rows: in the static cache when every row fits
        it (a dynamic batch moves there), else over a ``DynamicCache`` (a static batch moves out)."""
        import torch

        rows = (batch.rows if batch else []) + fresh.rows
        need = max(len(row.prompt) + row.limit - 1 for row in rows)  # the last sampled token is never fed
        if self._static is not None and self._static.reserve(len(rows), need, like=fresh.cache):
            if batch is not None and not batch.static:
                self._static.load(0, batch.cache, batch.attention, max(map(_filled, batch.rows)))
            self._static.load(len(rows) - len(fresh.rows), fresh.cache, fresh.attention, max(map(_filled, fresh.rows)))
            tokens, positions = fresh.tokens, fresh.positions
            if batch is not None:
                tokens, positions = torch.cat([batch.tokens, tokens]), torch.cat([batch.positions, positions])
            return _Batch(rows=rows, cache=None, attention=None, tokens=tokens, positions=positions, static=True)
        if batch is None:
            return fresh
        return self._merge(self._to_dynamic(batch) if batch.static else batch, fresh)

    def _to_dynamic(self, batch: _Batch) -> _Batch:
        """A static batch as a ``DynamicCache`` batch (its rows right-padded), for rows the static cache cannot hold."""
        import torch

        assert self._static is not None
        columns = max(map(_filled, batch.rows))
        attention = (torch.arange(columns, device=self.device) < batch.positions[:, None]).long()
        return _Batch(rows=batch.rows, cache=self._static.export(len(batch.rows), columns), attention=attention,
                      tokens=batch.tokens, positions=batch.positions)

    def _step(self, batch: _Batch) -> _Batch:
        """One decode step for every running row; finished rows leave, cache columns no row uses are trimmed."""
        import torch

        self.decode_steps += 1
        if batch.static:
            assert self._static is not None
            self.static_steps += 1
            logits = self._static.forward(batch.tokens, batch.positions, max(map(_filled, batch.rows)) + 1)
            tokens, logprobs = self._sample(logits, batch.rows)
            stepped = _Batch(rows=batch.rows, cache=None, attention=None, tokens=tokens, positions=batch.positions + 1,
                             static=True)
            return self._select(stepped, self._record(stepped, tokens, logprobs))
        attention = torch.cat([batch.attention, batch.attention.new_ones((len(batch.rows), 1))], dim=1)
        out = self.model(input_ids=batch.tokens.unsqueeze(-1), attention_mask=attention,
                         position_ids=batch.positions.unsqueeze(-1), use_cache=True, **{self._cache_arg: batch.cache})
        tokens, logprobs = self._sample(out.logits[:, -1, :], batch.rows)
        stepped = _Batch(rows=batch.rows, cache=getattr(out, self._cache_arg), attention=attention, tokens=tokens,
                         positions=batch.positions + 1)
        stepped = self._select(stepped, self._record(stepped, tokens, logprobs))
        used = stepped.attention.any(dim=0).nonzero()
        start = int(used[0]) if stepped.rows and len(used) else 0
        if start > 0:
            stepped.attention = stepped.attention[:, start:]
            for layer in stepped.cache.layers:
                layer.keys, layer.values = layer.keys[:, :, start:], layer.values[:, :, start:]
        return stepped

    def _select(self, batch: _Batch, keep: list[int]) -> _Batch:
        """The batch reduced to the rows ``keep`` (the still running ones), cache included; the rows past the
        kept count move into the finished rows' slots (``fill_holes``), so the cache copies few rows."""
        import torch

        if len(keep) == len(batch.rows):
            return batch
        keep = fill_holes(keep)
        index = torch.tensor(keep, dtype=torch.long, device=self.device)
        rows = [batch.rows[i] for i in keep]
        if batch.static:
            assert self._static is not None
            self._static.compact(keep, max(map(_filled, rows), default=0))
            return _Batch(rows=rows, cache=None, attention=None, tokens=batch.tokens[index],
                          positions=batch.positions[index], static=True)
        batch.cache.batch_select_indices(index)
        return _Batch(rows=rows, cache=batch.cache, attention=batch.attention[index],
                      tokens=batch.tokens[index], positions=batch.positions[index])

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

    def _finished(self, row: _Row) -> tuple[str, str | None] | None:
        ids = row.sampled
        if ids[-1] in self._eos_ids:
            return ("stop", "eos")
        if row.params.stop:
            tail = self.tokenizer.decode(ids[-_STOP_TAIL_TOKENS:], skip_special_tokens=False)
            for stop in row.params.stop:
                if tail.endswith(stop):
                    return ("stop", stop)
        if len(ids) >= row.limit:
            return ("length", None)
        return None

    # --- sessions: keys and values kept from one turn to the next -----------------------------------

    def _take_prefix(self, row: _Row) -> _Prefix | None:
        """The kept prefix of this row's session, cut to the start it shares with the prompt and to leave at least
        one prompt token to encode (whose logits sample the first token); it is used up either way."""
        session = row.params.session
        prefix = self._prefixes.pop(session, None) if session is not None else None
        if prefix is None:
            return None
        self._cached_bytes -= prefix.nbytes
        n = min(_shared_start(prefix.ids, row.prompt), len(row.prompt) - 1)
        if n <= 0:
            return None
        if n == len(prefix.ids):
            return prefix
        return _Prefix(prefix.ids[:n], [(keys[:, :n], values[:, :n]) for keys, values in prefix.layers], 0)

    def _keep_prefix(self, row: _Row, batch: _Batch, index: int) -> None:
        """Copy a finished row's keys and values for its session's next turn, unless over the byte budget."""
        session = row.params.session
        if session is None or self._closed:
            return
        columns = _filled(row)
        static = self._static if batch.static else None
        layers = [] if static else batch.cache.layers
        per_token = static.bytes_per_token if static else sum(
            layer.keys[index, :, 0].nbytes + layer.values[index, :, 0].nbytes for layer in layers)
        nbytes = per_token * columns
        if self._cached_bytes + nbytes > self.kv_cache_bytes:  # sized before copying: no copy over budget
            return
        if static:
            kept = static.row(index, columns)
        else:
            slots = batch.attention[index].nonzero().squeeze(1)
            kept = [(layer.keys[index][:, slots].clone(), layer.values[index][:, slots].clone()) for layer in layers]
        self._prefixes[session] = _Prefix(row.prompt + row.sampled[:-1], kept, nbytes)
        self._cached_bytes += nbytes

    def _cache_of(self, hits: list[_Prefix | None], cached: list[int], width: int) -> Any:
        """A ``DynamicCache`` of the newcomers' kept keys and values, left-padded to ``width``; None if none."""
        import torch
        from transformers import DynamicCache

        if width == 0:
            return DynamicCache()
        first = next(hit for hit in hits if hit)
        layers = []
        for layer in range(len(first.layers)):
            first_keys = first.layers[layer][0]
            heads, dim = first_keys.shape[0], first_keys.shape[2]
            keys = torch.zeros((len(hits), heads, width, dim), dtype=first_keys.dtype, device=self.device)
            values = torch.zeros_like(keys)
            for i, (hit, c) in enumerate(zip(hits, cached, strict=True)):
                if hit:
                    keys[i, :, width - c :] = hit.layers[layer][0]
                    values[i, :, width - c :] = hit.layers[layer][1]
            layers.append((keys, values))
        return DynamicCache(ddp_cache_data=layers, config=self.model.config)


def _constrain(logits: Any, rows: list[_Row]) -> Any:
    """``logits`` with each constrained row's disallowed tokens at -inf (``SamplingParams.constraint``); the
    same tensor when no row is constrained, so unconstrained sampling is untouched."""
    import torch

    masked = None
    for i, row in enumerate(rows):
        constraint = row.params.constraint
        allowed = constraint.allowed(row.sampled) if constraint is not None else None
        if allowed is None:
            continue
        ids = torch.as_tensor(allowed, dtype=torch.long, device=logits.device)
        if ids.numel() == 0:
            raise GenerationError("a token constraint allowed no token")
        if masked is None:
            masked = logits.clone()
        masked[i] = float("-inf")
        masked[i, ids] = logits[i, ids]
    return logits if masked is None else masked


def fill_holes(keep: list[int]) -> list[int]:
    """The new slot order of a batch keeping the rows ``keep`` (increasing): a kept row already in a slot under
    ``len(keep)`` stays there, and the kept rows past it fill the slots the others left, in order.

    So the cache moves one row per finished row at most, where keeping ``keep``'s order moves every row after
    the first finished one. Row order means nothing else: each row samples from its own random stream and
    every per-row tensor of the batch is indexed by the same order."""
    kept = len(keep)
    order = list(range(kept))
    stays = {i for i in keep if i < kept}
    holes = (slot for slot in range(kept) if slot not in stays)
    for slot, row in zip(holes, (i for i in keep if i >= kept)):
        order[slot] = row
    return order


def _filled(row: _Row) -> int:
    """Tokens of ``row`` in the KV cache: its prompt and all it sampled but the last (the next one fed)."""
    return len(row.prompt) + len(row.sampled) - 1


def _shared_start(a: list[int], b: list[int]) -> int:
    """How many leading ids ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:  # the usual case, a turn that extends the last one: one comparison in C
        return n
    return next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
