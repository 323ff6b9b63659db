"""The from-scratch tokenizer: protocol tags and digits are single tokens, and text round-trips."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoTokenizer


def test_numbers_split_into_single_digit_tokens_shared_with_and_without_commas(tiny_model_dir: Path) -> None:
    """A number on a page ("1,901,400") and in an answer ("1901400") must share digit tokens, so copying
    one into the other is token-by-token; a BPE merge such as "1901" would make them differ."""
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    digits = [tokenizer.convert_tokens_to_ids(str(d)) for d in "1901400"]
    assert tokenizer.encode("1901400", add_special_tokens=False) == digits
    with_commas = tokenizer.encode("1,901,400", add_special_tokens=False)
    assert [t for t in with_commas if t in digits] == digits and len(with_commas) == 9
    for text in ("born in 1901 in Vesk", "population 1,901,400.", "https://wiki.example/acme_1901"):
        assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text


def test_protocol_tags_are_single_tokens(tiny_model_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    for tag in ("<think>", "</think>", "<tool_call>", "</tool_call>", "<answer>", "</answer>"):
        assert len(tokenizer.encode(tag, add_special_tokens=False)) == 1, tag
