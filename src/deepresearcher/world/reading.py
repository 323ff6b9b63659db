"""How the world's pages state facts, as a reader sees them: the value of a relation read off a page's text, and
the rule for weighing pages that disagree.

A page states a fact in one of the forms it was rendered with (``world.pages``): an infobox row under the
relation's label (``INFOBOX_LABELS``), a subject's row in a list table (``LIST_COLUMNS``), a subject's entry in a
list (``LIST_ENTRIES``), a list whose title names the value its entries share (``LIST_TITLES``), or a sentence
naming the subject (the relation's ``sentence``: how the unreliable sites write it). Scripted researchers (the
oracle, the first-hit baseline) read pages by these forms, never by a copy of the facts.

The world's rule for sources that disagree: the reliable sites (``world.pages.RELIABLE_HOSTS``: the encyclopedia,
the directory, the catalogue, the news) outweigh the unreliable ones (blogs, the forum, the trivia site, whose
pages hedge what they say); among pages of one kind the most common value wins, then the one read first.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from deepresearcher.world import pages
from deepresearcher.world.knowledge import RELATIONS

__all__ = ["extract_value", "weigh"]

# What a value of each kind looks like in page text; a name or a word is whatever fills its cell.
_VALUE = {"year": r"\d{4}", "number": r"\d[\d,]*"}
_CELL = r"[^|\n]*?[^|\s]"
_NAME = r"[A-Z][^.\n]*?[^.\s]"  # a name in a sentence: capitalized, up to the sentence's full stop


def _value(relation: str, in_sentence: bool = False) -> str:
    return f"({_VALUE.get(RELATIONS[relation].value_kind, _NAME if in_sentence else _CELL)})"


def _fill(template: str, relation: str, subject: str, in_sentence: bool = False) -> str:
    """A page's text ``template`` (``{s}`` the subject, ``{v}`` the value) as a regex capturing the value."""
    parts = re.split(r"(\{[sv]\})", template)
    return "".join(re.escape(subject) if p == "{s}" else _value(relation, in_sentence) if p == "{v}" else re.escape(p)
                   for p in parts)


def _row(*cells: str) -> str:
    """A table row as the tools' text writes it (``| a | b |``, ``web.html``), its cells given as regexes."""
    return r"\|\s*" + r"\s*\|\s*".join(cells) + r"\s*\|"


def _statements(relation: str, subject: str) -> list[str]:
    """Regexes for the ways the world's pages state ``relation`` of ``subject``, in reading order: an infobox row
    under the relation's label, the subject's row in a list table, the subject's entry in a list, a sentence."""
    found = [_row(re.escape(pages.INFOBOX_LABELS[relation]), _value(relation))]
    if relation in pages.LIST_COLUMNS:
        found.append(_row(re.escape(subject), _value(relation)))
    if relation in pages.LIST_ENTRIES:
        found.append(_fill(pages.LIST_ENTRIES[relation], relation, subject))
    found.append(_fill(RELATIONS[relation].sentence.removesuffix("."), relation, subject, in_sentence=True))
    return found


def extract_value(relation: str, subject: str, text: str, title: str = "") -> str | None:
    """The value of ``relation`` for ``subject`` stated in ``text`` (a page's notes or a snippet), if any.

    A list page whose ``title`` names the value its entries share (``pages.LIST_TITLES``) states it for every
    subject it lists. Numbers come back without thousands separators.
    """
    for pattern in _statements(relation, subject):
        match = re.search(pattern, text)
        if match:
            return match.group(1).replace(",", "") if RELATIONS[relation].value_kind == "number" else match.group(1)
    if relation in pages.LIST_TITLES and subject in text:
        match = re.fullmatch(_fill(pages.LIST_TITLES[relation], relation, subject), title)
        if match:
            return match.group(1)
    return None


def weigh(read: Iterable[tuple[str, str]]) -> str | None:
    """The value the world's rule believes among ``(url, value)`` pairs read in order: the reliable sites' most
    common value, else the unreliable ones'; ties go to the value read first. None when nothing was read."""
    read = list(read)
    for reliable in (True, False):
        values = [value for url, value in read if pages.is_unreliable(url) != reliable]
        if values:
            counts = Counter(values)
            top = max(counts.values())
            return next(v for v in values if counts[v] == top)
    return None
