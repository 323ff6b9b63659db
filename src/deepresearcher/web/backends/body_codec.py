"""Document bodies stored one by one as zstd frames, with a dictionary trained on the corpus's first bodies.

Why: tantivy's doc store compresses 16 KB blocks with LZ4, which finds few repeats in 100-word passages
and has no entropy coder, so stored bodies were ~0.85x the corpus and a wiki-size index 1.13x it. zstd
with a dictionary (made for many small records) stores generated passages in 0.58x of their bytes,
compresses one in ~3.6 us and decompresses it in ~1.9 us at level 1 (`bench search`'s passages, one thread;
level 3 took 5.6 us for 0.579x against 0.587x, and the build is CPU-bound). A corpus
too small to train a dictionary on gets plain zstd frames.
"""

from __future__ import annotations

import threading
from pathlib import Path

import zstandard

DICTIONARY_FILE = "deepresearcher-body.zdict"  # absent: frames without a dictionary
DICTIONARY_BYTES = 64 * 1024  # 112 KB (zstd's default) compressed no better
DICTIONARY_SAMPLES = 20_000  # bodies the dictionary is trained on: the first ones of the corpus
MIN_DICTIONARY_SAMPLES = 1_000  # fewer bodies than this: no dictionary (training would fail or overfit)
LEVEL = 1


class BodyCodec:
    """Compresses bodies at build and decompresses them at search; safe to share between threads."""

    def __init__(self, dictionary: bytes | None = None) -> None:
        self.dictionary = dictionary
        self._dict = zstandard.ZstdCompressionDict(dictionary) if dictionary else None
        self._local = threading.local()  # zstandard's (de)compressors must not be used by two threads at once

    @classmethod
    def trained_on(cls, bodies: list[str]) -> BodyCodec:
        """A codec whose dictionary is trained on ``bodies`` (without one when they are too few to train on)."""
        samples = [body.encode("utf-8") for body in bodies if body]
        if len(samples) < MIN_DICTIONARY_SAMPLES:
            return cls()
        try:
            return cls(zstandard.train_dictionary(DICTIONARY_BYTES, samples, level=LEVEL).as_bytes())
        except zstandard.ZstdError:  # e.g. samples too alike or too short to learn from
            return cls()

    @classmethod
    def load(cls, index_dir: str | Path) -> BodyCodec:
        path = Path(index_dir) / DICTIONARY_FILE
        return cls(path.read_bytes() if path.is_file() else None)

    def save(self, index_dir: str | Path) -> None:
        path = Path(index_dir) / DICTIONARY_FILE
        if self.dictionary:
            path.write_bytes(self.dictionary)
        else:
            path.unlink(missing_ok=True)

    def compress(self, text: str) -> bytes:
        return self._coders()[0].compress(text.encode("utf-8"))

    def decompress(self, frame: bytes) -> str:
        return self._coders()[1].decompress(frame).decode("utf-8")

    def _coders(self) -> tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]:
        coders = getattr(self._local, "coders", None)
        if coders is None:
            coders = (zstandard.ZstdCompressor(level=LEVEL, dict_data=self._dict, write_checksum=False,
                                               write_dict_id=False),
                      zstandard.ZstdDecompressor(dict_data=self._dict))
            self._local.coders = coders
        return coders
