"""The from-scratch tokenizer: protocol tags are single tokens, digits too where asked, and text round-trips."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoTokenizer


def test_numbers_split_into_single_digit_tokens_shared_with_and_without_commas(tiny_model_dir: Path) -> None:
    """A number on a page ("1,901,400") and in an answer ("1901400") share digit tokens where BPE learned no
    digit merges (this small vocabulary), so copying one into the other is token by token; a larger vocabulary
    merges digits unless ``split_digits`` (the test below)."""
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


def test_split_digits_reads_every_year_digit_by_digit_where_bpe_would_merge_them(tmp_path: Path) -> None:
    """On a corpus full of years, plain BPE merges them unevenly (" 1912" one token, " 190" + "1" two), so two
    years cannot be compared digit for digit; ``split_digits`` keeps each digit a token of its own."""
    from deepresearcher.quickstart.tiny_model import train_tokenizer

    years = [str(1850 + i % 150) for i in range(3000)]
    corpus = [f"It was founded in {a}, and the other in {b}." for a, b in zip(years, reversed(years), strict=True)]

    def pieces(split_digits: bool) -> list[list[str]]:
        out = train_tokenizer(corpus, tmp_path / str(split_digits), vocab_size=600, split_digits=split_digits)
        tokenizer = AutoTokenizer.from_pretrained(str(out))
        return [tokenizer.tokenize(f" {year}") for year in ("1901", "1912", "1933", "1999")]

    assert all(p == ["Ġ", *year] for p, year in zip(pieces(True), ("1901", "1912", "1933", "1999"), strict=True))
    assert any(len(p) < 5 for p in pieces(False))
