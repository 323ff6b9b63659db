"""Token constraints of guided turns: what a model may write in each free part of a protocol turn.

Each is a ``TokenConstraint`` (``inference.sampling``): the local engine asks it, before every step of a
request, which tokens may come next and masks the rest. Three shapes cover a turn:

- ``FreeText``: any token but those that would leave the part (open a tag, close a JSON string, start a new
  line); the one token that ends the part is allowed once something was written;
- ``Choice``: one of a few texts (a tool's tag, a URL the search returned), picked token by token by the model;
- ``CopySpan``: a span of given texts (what the tools returned), from the start of a word to the end of one.

They match token *texts*, so they work for any tokenizer; ``Vocabulary`` decodes each token once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

_REPLACEMENT = "\ufffd"
"""What a token holding part of a multi-byte character decodes to alone: such tokens are never matched."""


class Vocabulary:
    """Each token's text, decoded once per tokenizer, and the ids of each text."""

    def __init__(self, tokenizer: Any) -> None:
        size = len(tokenizer)
        self.texts: list[str] = tokenizer.batch_decode(
            [[i] for i in range(size)], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        special = set(tokenizer.all_special_ids)
        self.plain = [i for i, text in enumerate(self.texts) if i not in special and text and _REPLACEMENT not in text]
        """Ids of ordinary tokens: no special token, no fragment of a character."""
        self.by_text: dict[str, list[int]] = {}
        for i in self.plain:
            self.by_text.setdefault(self.texts[i], []).append(i)
        self.longest = max(map(len, self.by_text))

    def text(self, ids: Iterable[int]) -> str:
        """The text of ``ids`` as the tokens' own texts joined (what the constraints matched)."""
        return "".join(self.texts[i] for i in ids)

    def ids(self, text: str) -> list[int]:
        """The tokens whose whole text is ``text``."""
        return self.by_text.get(text, [])

    def avoiding(self, chars: str) -> list[int]:
        """Ordinary tokens that contain none of ``chars``."""
        banned = set(chars)
        return [i for i in self.plain if banned.isdisjoint(self.texts[i])]


class FreeText:
    """Free text that stays inside its part: tokens with none of ``banned`` characters, and ``end`` (a token text,
    the part's stop string) once at least one non-blank token was written."""

    def __init__(self, vocab: Vocabulary, banned: str, end: str) -> None:
        import torch

        inside = vocab.avoiding(banned + end)
        self._first = torch.tensor([i for i in inside if vocab.texts[i].strip()], dtype=torch.long)
        self._rest = torch.tensor(sorted({*inside, *vocab.ids(end)}), dtype=torch.long)
        self._vocab = vocab

    def allowed(self, sampled: list[int]) -> Any:
        return self._rest if self._vocab.text(sampled).strip() else self._first


class Choice:
    """One of ``options``, chosen by the model: each step allows the first token of the rest of every option that
    the text so far begins. Options must not be prefixes of one another (end each with a stop string)."""

    def __init__(self, vocab: Vocabulary, encode: Callable[[str], list[int]], options: Sequence[str]) -> None:
        if not options:
            raise ValueError("a choice needs at least one option")
        self._vocab, self._encode, self.options = vocab, encode, list(dict.fromkeys(options))

    def allowed(self, sampled: list[int]) -> list[int]:
        text = self._vocab.text(sampled)
        ids = {self._encode(option[len(text):])[0] for option in self.options
               if option.startswith(text) and len(option) > len(text)}
        if not ids:
            raise ValueError(f"{text!r} begins none of the options")
        return sorted(ids)

    def chosen(self, text: str) -> str | None:
        """The option ``text`` ends with (the engine stopped on its stop string), if any."""
        return next((option for option in self.options if text.endswith(option)), None)


class CopySpan:
    """A span copied from ``sources``, within one line: it starts at a word (or the space before one), each token
    continues some occurrence of the span so far, and ``end`` is allowed once the span ends where a word does.

    The model chooses which span by its own preferences among the continuations; it cannot write text that is
    not in the sources.
    """

    def __init__(self, vocab: Vocabulary, sources: Iterable[str], end: str = "\n") -> None:
        self._vocab = vocab
        self.lines = list(dict.fromkeys(line for source in sources for line in source.splitlines() if line.strip()))
        if not self.lines:
            raise ValueError("nothing to copy from")
        self._end = vocab.ids(end)

    def allowed(self, sampled: list[int]) -> list[int]:
        span = self._vocab.text(sampled)
        ids: set[int] = set()
        can_end = False
        for line in self.lines:
            for start in _occurrences(line, span):
                after = start + len(span)
                can_end |= bool(span.strip()) and (after == len(line) or not line[after].isalnum())
                rest = line[after : after + self._vocab.longest]
                for k in range(1, len(rest) + 1):
                    ids.update(self._vocab.ids(rest[:k]))
        if can_end or not ids:
            ids.update(self._end)
        return sorted(ids)


def _occurrences(line: str, span: str) -> Iterable[int]:
    """Where ``span`` occurs in ``line`` starting at a word or at the space before one."""
    start = line.find(span)
    while 0 <= start < len(line):
        if _word_start(line, start):
            yield start
        start = line.find(span, start + 1)


def _word_start(line: str, i: int) -> bool:
    if line[i] == " ":
        return i + 1 < len(line) and line[i + 1].isalnum()
    return line[i].isalnum() and (i == 0 or not line[i - 1].isalnum())
