"""The engine's decode step over a static KV cache, replayed as CUDA graphs on a GPU.

Why: on a GPU a decode step of a small model is launch-bound: transformers' eager forward launches a few
hundred small kernels (and runs their Python) to compute one token per row, and the GPU waits on the CPU. A
CUDA graph replays the whole step's kernels with one launch, but it needs every tensor it touches at a fixed
address and shape, which a ``DynamicCache`` that grows (and is trimmed and merged) each step is not.

**Layout.** Per layer, keys and values live in buffers ``[slots, kv_heads, columns, head_dim]`` in the
model's dtype, on its device. Row ``i`` of the running batch occupies slot ``i`` with its tokens at columns
``0..L-1`` in order, so a row's next position, the column its key and value are written to, and its count of
cached tokens are one number. A step writes each row's key and value at that column (:class:`SlotCache`,
the ``Cache`` the model's attention layers call) and attends through an additive 4D mask ``[rows, 1, 1,
width]`` open up to it; transformers' ``create_causal_mask`` hands a 4D mask through as already prepared, and
SDPA and eager attention add it to their scores. Rows that leave are compacted (the last slots move into the
holes); rows that join are prefilled eagerly into a ``DynamicCache`` as before and their valid columns are
gathered into the next free slots (:meth:`StaticDecoder.load`).

**Capacity.** Slots and columns grow on demand (slots by batch bucket up to ``max_rows``, columns by powers of
two up to the model's positions), copying what is cached, while ``slots * columns`` tokens of keys and values
stay within ``budget_bytes``; :meth:`StaticDecoder.reserve` says when a batch does not fit, and the engine then
decodes it over a ``DynamicCache``.

**Graphs.** With ``graphs`` on, each ``(batch bucket, width bucket)`` step is captured once, on first use,
after an eager warm-up on a side stream, all graphs sharing one memory pool. Buckets: rows 1, 2, 4, ... up to
``max_rows``; widths 64, 128, ... up to the column capacity, so a short context does not read the whole buffer.
A batch is padded to its bucket with idle rows that write at column 0 of free slots (never read: a row that
joins overwrites its slot). Inputs (token ids and positions) are static tensors copied into before each
replay; logits come out of a static float32 tensor. Sampling stays outside the graph (per-row Python RNG).
Without graphs (the CPU) the same step runs eagerly, padded the same way.

**Weights.** A graph reads the parameters from the storage they had at capture, so weights must be updated in
place, as ``train.async_worker.EngineWeightTransfer`` (``copy_`` under the engine's ``weights_lock``) and
optimizer steps do. As a safety net, a parameter or buffer whose storage moved (``.data`` reassigned, the
model moved with ``.to()``) is noticed before the next replay (20 µs of data pointers per step) and the
graphs are captured anew; a module given new ``Parameter`` objects (``load_state_dict(assign=True)``) is
noticed at the next admission, where the model's tensors are listed anew (a walk of all its modules).
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from typing import Any

import torch
from transformers.cache_utils import Cache, DynamicCache

from deepresearcher.inference.kv_cache import make_roomy

logger = logging.getLogger(__name__)

_MIN_WIDTH = 64
"""The narrowest attended width (and column capacity): a multiple of 8, as SDPA's masked kernels want."""


def supports_static_decode(model: Any) -> str | None:
    """None if ``model`` can decode over the static cache, else why not (a model of sliding-window or
    linear-attention layers, or an attention implementation that takes no 4D additive mask)."""
    config = model.config
    kinds = set(getattr(config, "layer_types", None) or ["full_attention"])
    if kinds != {"full_attention"}:
        return f"its layers are {sorted(kinds)}, not all full attention"
    implementation = getattr(config, "_attn_implementation", None) or "eager"
    if implementation not in ("sdpa", "eager"):
        return f"its attention implementation {implementation!r} takes no 4D mask (sdpa and eager do)"
    return None


class SlotCache(Cache):
    """The cache a static decode step hands the model: ``update`` writes row ``i``'s new key and value (one
    token) at column ``positions[i]`` of slot ``i`` and returns slots ``[:rows]``, columns ``[:width]``."""

    def __init__(self, keys: list[torch.Tensor], values: list[torch.Tensor], rows: torch.Tensor,
                 positions: torch.Tensor, width: int) -> None:
        super().__init__(layers=[])
        self._keys, self._values, self._rows, self._positions, self._width = keys, values, rows, positions, width

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = self._keys[layer_idx], self._values[layer_idx]
        keys[self._rows, :, self._positions] = key_states[:, :, -1]
        values[self._rows, :, self._positions] = value_states[:, :, -1]
        rows = len(self._rows)
        return keys[:rows, :, : self._width], values[:rows, :, : self._width]


@dataclass
class _StepTensors:
    """The step's static inputs and output, one entry per slot: what a captured graph reads and writes."""

    tokens: torch.Tensor
    positions: torch.Tensor
    rows: torch.Tensor
    columns: torch.Tensor
    logits: torch.Tensor

    @classmethod
    def allocate(cls, slots: int, columns: int, vocab: int, device: torch.device) -> _StepTensors:
        return cls(tokens=torch.zeros(slots, dtype=torch.long, device=device),
                   positions=torch.zeros(slots, dtype=torch.long, device=device),
                   rows=torch.arange(slots, device=device), columns=torch.arange(columns, device=device),
                   logits=torch.zeros((slots, vocab), dtype=torch.float32, device=device))


def _row_buckets(max_rows: int) -> list[int]:
    return sorted({min(1 << i, max_rows) for i in range(max_rows.bit_length() + 1)})


class StaticDecoder:
    """Static key/value buffers for the running batch's rows, and the decode step over them (module docstring)."""

    def __init__(self, model: Any, *, max_rows: int, max_columns: int | None, budget_bytes: int, graphs: bool,
                 cache_arg: str) -> None:
        self.model = model
        self.max_columns = max_columns
        self.budget_bytes = budget_bytes
        self.graphs = graphs
        self._cache_arg = cache_arg
        self._row_buckets = _row_buckets(max_rows)
        self.bytes_per_token = 0
        """Bytes of keys and values one cached token takes over all layers (known from the first prefill)."""
        self.slots = self.columns = 0
        self._keys: list[torch.Tensor] = []
        self._values: list[torch.Tensor] = []
        self._io: _StepTensors | None = None
        self._graphs: dict[tuple[int, int], torch.cuda.CUDAGraph] = {}
        self._pool: Any = None
        self._weight_tensors: list[torch.Tensor] = []
        self._weight_pointers: list[int] = []

    # --- capacity --------------------------------------------------------------------------------------

    def reserve(self, rows: int, columns: int, like: Any) -> bool:
        """Make room for ``rows`` rows of ``columns`` tokens (growing the buffers, what they hold kept) and say
        whether it fits the budget and the model's positions; ``like`` is a prefill's ``DynamicCache``, whose
        layers give the buffers' shapes, dtype and device."""
        if self.bytes_per_token == 0:
            self.bytes_per_token = sum(layer.keys[0, :, 0].nbytes + layer.values[0, :, 0].nbytes
                                       for layer in like.layers)
        if rows > self._row_buckets[-1] or (self.max_columns is not None and columns > self.max_columns):
            return False
        slots = max(self.slots, next(b for b in self._row_buckets if b >= rows))
        wanted = max(self.columns, _MIN_WIDTH, 1 << (columns - 1).bit_length())
        capacity = min(wanted, self.max_columns) if self.max_columns is not None else wanted
        if slots * capacity * self.bytes_per_token > self.budget_bytes:
            return False
        if (slots, capacity) != (self.slots, self.columns):
            self._allocate(slots, capacity, like)
        return True

    def _allocate(self, slots: int, columns: int, like: Any) -> None:
        """New buffers of ``slots`` x ``columns`` holding what the old ones held; captured graphs are dropped."""
        keys, values = [], []
        for i, layer in enumerate(like.layers):
            for out, old, sample in ((keys, self._keys, layer.keys), (values, self._values, layer.values)):
                heads, dim = sample.shape[1], sample.shape[3]
                buffer = sample.new_zeros((slots, heads, columns, dim))
                if old:
                    buffer[: self.slots, :, : self.columns] = old[i]
                out.append(buffer)
        self._keys, self._values, self.slots, self.columns = keys, values, slots, columns
        vocab = self.model.get_output_embeddings().weight.shape[0]
        self._io = _StepTensors.allocate(slots, columns, vocab, keys[0].device)
        self._graphs.clear()
        self._pool = None

    def release(self) -> None:
        """Free the buffers and graphs (the engine is closing)."""
        self._graphs.clear()
        self._pool = None
        self._keys, self._values, self._io, self.slots, self.columns = [], [], None, 0, 0

    # --- moving rows in, out and around ------------------------------------------------------------------

    def load(self, first: int, cache: Any, attention: torch.Tensor, columns: int) -> None:
        """Copy each row's valid columns (``attention`` 1) of a left-padded ``DynamicCache``, in order, into
        slots ``first``, ``first + 1``, ...; ``columns`` is the most any row has."""
        if self.graphs:  # once per admission: the walk over all modules costs too much per step (**Weights**)
            self._weight_tensors = list(itertools.chain(self.model.parameters(), self.model.buffers()))
        rows = attention.shape[0]
        order = torch.argsort(attention, dim=1, descending=True, stable=True)[:, :columns]
        for layer, keys, values in zip(cache.layers, self._keys, self._values, strict=True):
            index = order[:, None, :, None].expand(rows, layer.keys.shape[1], columns, layer.keys.shape[3])
            keys[first : first + rows, :, :columns] = layer.keys.gather(2, index)
            values[first : first + rows, :, :columns] = layer.values.gather(2, index)

    def compact(self, keep: list[int], columns: int) -> None:
        """Move the rows ``keep`` (slot indices, in any order: ``engine.fill_holes`` moves few) to slots
        ``0..len(keep)-1``; ``columns`` is the most any moved row holds."""
        moves = [(to, at) for to, at in enumerate(keep) if to != at]
        if not moves:
            return
        device = self._keys[0].device
        to = torch.tensor([m[0] for m in moves], device=device)
        at = torch.tensor([m[1] for m in moves], device=device)
        for buffer in itertools.chain(self._keys, self._values):
            buffer[to, :, :columns] = buffer[at, :, :columns]

    def row(self, slot: int, columns: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """A copy of one slot's first ``columns`` keys and values: ``(keys, values)`` [heads, columns, dim] per
        layer."""
        return [(keys[slot, :, :columns].clone(), values[slot, :, :columns].clone())
                for keys, values in zip(self._keys, self._values, strict=True)]

    def export(self, rows: int, columns: int) -> Any:
        """A ``DynamicCache`` (roomy) of a copy of slots ``[:rows]``, columns ``[:columns]``: right-padded rows."""
        data = [(keys[:rows, :, :columns].clone(), values[:rows, :, :columns].clone())
                for keys, values in zip(self._keys, self._values, strict=True)]
        return make_roomy(DynamicCache(ddp_cache_data=data, config=self.model.config))

    # --- the step ----------------------------------------------------------------------------------------

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, widest: int) -> torch.Tensor:
        """Feed ``tokens[i]`` at ``positions[i]`` for the rows in slots ``0..n-1`` (caching its key and value);
        ``widest`` is the largest position + 1. Returns float32 logits [n, vocab] (a view of a static tensor,
        valid until the next step)."""
        assert self._io is not None, "reserve() allocates the buffers before a step"
        n = tokens.shape[0]
        rows = next(b for b in self._row_buckets if b >= n)
        width = min(self.columns, max(_MIN_WIDTH, 1 << (widest - 1).bit_length()))
        self._io.tokens[:n].copy_(tokens)
        self._io.tokens[n:rows].zero_()
        self._io.positions[:n].copy_(positions)
        self._io.positions[n:rows].zero_()  # idle rows write column 0 of their free slots
        if self.graphs:
            self._replay(rows, width)
        else:
            self._run(rows, width)
        return self._io.logits[:n]

    def _run(self, rows: int, width: int) -> None:
        """The model's forward over the static inputs of the first ``rows`` slots, logits into the static output."""
        io = self._io
        assert io is not None
        positions = io.positions[:rows]
        dtype = self._keys[0].dtype
        visible = io.columns[:width] <= positions[:, None]
        mask = torch.full((rows, 1, 1, width), torch.finfo(dtype).min, dtype=dtype, device=positions.device)
        mask.masked_fill_(visible[:, None, None, :], 0.0)
        cache = SlotCache(self._keys, self._values, io.rows[:rows], positions, width)
        out = self.model(input_ids=io.tokens[:rows, None], position_ids=positions[:, None], attention_mask=mask,
                         use_cache=True, logits_to_keep=1, **{self._cache_arg: cache})
        io.logits[:rows].copy_(out.logits[:, -1])

    def _replay(self, rows: int, width: int) -> None:
        """The step for this bucket from its graph: captured on first use, anew when a weight's storage moved."""
        pointers = [t.data_ptr() for t in self._weight_tensors]
        if pointers != self._weight_pointers:  # a weight's storage moved: the graphs would read the old one
            self._graphs.clear()
            self._weight_pointers = pointers
        graph = self._graphs.get((rows, width))
        if graph is None:
            graph = self._capture(rows, width)
            if graph is None:
                self._run(rows, width)
                return
            self._graphs[(rows, width)] = graph
        graph.replay()

    def _capture(self, rows: int, width: int) -> torch.cuda.CUDAGraph | None:
        """The step for this bucket as a CUDA graph; None (graphs off from now on, logged) if capture fails."""
        device = self._keys[0].device
        with torch.cuda.device(device):
            side = torch.cuda.Stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):  # warm up: lazy initialisations, cuBLAS workspaces, the allocator
                self._run(rows, width)
            torch.cuda.current_stream(device).wait_stream(side)
            if self._pool is None:
                self._pool = torch.cuda.graph_pool_handle()
            graph = torch.cuda.CUDAGraph()
            try:
                # thread_local: a trainer's thread using the GPU meanwhile does not break (or join) the capture
                with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
                    self._run(rows, width)
            except Exception:  # noqa: BLE001 - an uncapturable model decodes eagerly instead of failing the batch
                logger.warning("capturing the decode step as a CUDA graph failed; decoding eagerly from now on",
                               exc_info=True)
                self.graphs = False
                self._graphs.clear()
                return None
        return graph
