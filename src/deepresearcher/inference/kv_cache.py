"""A key/value cache layer with room to grow, so a decode step writes its column instead of copying the cache.

transformers' ``DynamicLayer`` appends each step's keys and values with ``torch.cat``: every step copies the
whole cache of every layer, a sixth of a small model's decode time on the CPU at a few hundred tokens of
context. ``RoomyLayer`` keeps keys and values at the front of a buffer with spare columns and writes new
columns in place; the layer's ``keys`` and ``values`` stay views of the filled part, so everything that
reads or reassigns them (attention, the engine's row selection, merging and trimming) works unchanged.
Whenever they were reassigned from outside, the next update moves them into a fresh buffer.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import DynamicLayer

_MIN_ROOM = 64
"""Spare columns at least, so short turns do not re-buffer every few steps."""


class RoomyLayer(DynamicLayer):
    """A ``DynamicLayer`` whose keys and values are views of the front of larger buffers."""

    _key_buffer: torch.Tensor | None = None
    _value_buffer: torch.Tensor | None = None

    @classmethod
    def from_layer(cls, layer: DynamicLayer) -> RoomyLayer:
        """The same keys and values (moved into a buffer on the next update)."""
        roomy = cls()
        roomy.__dict__.update(layer.__dict__)
        return roomy

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
               ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized or self.keys.numel() == 0:
            return super().update(key_states, value_states, *args, **kwargs)
        filled, new = self.keys.shape[-2], key_states.shape[-2]
        if not self._fronts_buffers() or filled + new > self._key_buffer.shape[-2]:  # type: ignore[union-attr]
            self._rebuffer(filled + new)
        assert self._key_buffer is not None and self._value_buffer is not None
        self._key_buffer[:, :, filled : filled + new] = key_states
        self._value_buffer[:, :, filled : filled + new] = value_states
        self.keys = self._key_buffer[:, :, : filled + new]
        self.values = self._value_buffer[:, :, : filled + new]
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep the rows ``indices`` (row ``j`` becomes the old row ``indices[j]``), in place: only the rows that
        change slot are copied, and only their filled columns.

        Copying the whole buffer (``index_select``, room and unmoved rows included) whenever a row finished was
        a third of a held-out evaluation's time on the CPU (64-128 rows of up to ~1,000 columns); the engine
        (``LocalEngine._select``) fills the slots of finished rows with the last rows, so a finished row moves
        about one row, not every row after it."""
        if not self._fronts_buffers():
            super().batch_select_indices(indices)
            return
        assert self._key_buffer is not None and self._value_buffer is not None
        filled, kept = self.keys.shape[-2], indices.numel()
        moved = (indices != torch.arange(kept, device=indices.device)).nonzero().squeeze(1)
        if moved.numel():
            source = indices[moved]
            for buffer in (self._key_buffer, self._value_buffer):
                buffer[moved, :, :filled] = buffer[source, :, :filled]  # the right side is gathered first
        self._key_buffer = self._key_buffer[:kept]
        self._value_buffer = self._value_buffer[:kept]
        self.keys = self._key_buffer[:, :, :filled]
        self.values = self._value_buffer[:, :, :filled]

    def _fronts_buffers(self) -> bool:
        """Whether ``keys``/``values`` are still the views this layer made (not reassigned since)."""
        return all(
            buffer is not None and view.data_ptr() == buffer.data_ptr() and view.shape[:2] == buffer.shape[:2]
            and view.stride() == buffer.stride()
            for view, buffer in ((self.keys, self._key_buffer), (self.values, self._value_buffer))
        )

    def _rebuffer(self, needed: int) -> None:
        filled = self.keys.shape[-2]
        columns = needed + max(_MIN_ROOM, needed // 2)
        batch, heads, _, dim = self.keys.shape
        self._key_buffer = self.keys.new_empty((batch, heads, columns, dim))
        self._value_buffer = self.values.new_empty((batch, heads, columns, self.values.shape[-1]))
        self._key_buffer[:, :, :filled] = self.keys
        self._value_buffer[:, :, :filled] = self.values
        self.keys = self._key_buffer[:, :, :filled]
        self.values = self._value_buffer[:, :, :filled]


def make_roomy(cache: Any) -> Any:
    """``cache`` (a ``DynamicCache``) with each plain ``DynamicLayer`` replaced by a ``RoomyLayer``."""
    cache.layers = [RoomyLayer.from_layer(layer) if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache
