"""RoomyLayer: the same keys and values as transformers' DynamicLayer, without copying the cache each step."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from transformers.cache_utils import DynamicLayer

from deepresearcher.inference.kv_cache import RoomyLayer


def _pair(rows: int, columns: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(rows, 2, columns, 4, generator=gen), torch.randn(rows, 2, columns, 4, generator=gen)


def test_roomy_layer_matches_dynamic_layer_through_steps_selection_and_reassignment() -> None:
    plain, roomy = DynamicLayer(), RoomyLayer()
    prefill = _pair(3, 5, seed=0)
    plain.update(*prefill)
    roomy.update(*prefill)
    for step in range(1, 90):  # past the first buffer's room, so it re-buffers at least once
        new = _pair(len(plain.keys), 1, seed=step)
        keys, values = roomy.update(*new)
        plain.update(*new)
        assert torch.equal(keys, plain.keys) and torch.equal(values, plain.values)
        if step == 30:  # a row finishes
            index = torch.tensor([0, 2])
            plain.batch_select_indices(index)
            roomy.batch_select_indices(index)
        if step == 60:  # the engine trims columns no row uses
            plain.keys, plain.values = plain.keys[:, :, 3:], plain.values[:, :, 3:]
            roomy.keys, roomy.values = roomy.keys[:, :, 3:], roomy.values[:, :, 3:]
    assert roomy.get_seq_length() == plain.get_seq_length()


def test_a_decode_step_writes_in_place_while_the_buffer_has_room() -> None:
    layer = RoomyLayer()
    layer.update(*_pair(2, 8, seed=0))
    layer.update(*_pair(2, 1, seed=1))  # moves the cache into a buffer with room
    storage = layer.keys.data_ptr()
    for step in range(2, 40):
        layer.update(*_pair(2, 1, seed=step))
        assert layer.keys.data_ptr() == storage  # no new allocation, no copy of the earlier columns
    assert layer.keys.shape == (2, 2, 8 + 38 + 1, 4)


def test_selecting_rows_copies_in_place_only_the_rows_that_change_slot() -> None:
    """Rows 1 and 3 of 5 finish; the engine's order (``fill_holes``) keeps rows 0 and 2 where they are and moves
    row 4 into slot 1: the same keys and values as DynamicLayer's selection, without a new buffer."""
    from deepresearcher.inference.engine import fill_holes

    plain, roomy = DynamicLayer(), RoomyLayer()
    for seed, columns in enumerate((6, 1, 1)):  # the second update moves the cache into a buffer with room
        pair = _pair(5, columns, seed=seed)
        plain.update(*pair)
        roomy.update(*pair)
    order = fill_holes([0, 2, 4])
    assert order == [0, 4, 2]
    storage, row2 = roomy.keys.data_ptr(), roomy.keys[2].clone()
    index = torch.tensor(order)
    plain.batch_select_indices(index)
    roomy.batch_select_indices(index)
    assert torch.equal(roomy.keys, plain.keys) and torch.equal(roomy.values, plain.values)
    assert roomy.keys.data_ptr() == storage, "selected in place, not copied into a new buffer"
    assert torch.equal(roomy.keys[2], row2)
    keys, _ = roomy.update(*_pair(3, 1, seed=9))  # decoding goes on in the same buffer
    assert keys.data_ptr() == storage and keys.shape == (3, 2, 9, 4)
