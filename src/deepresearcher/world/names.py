"""Invented names for the synthetic web: pronounceable, unique, and unknown to any pretrained model.

Names are built from syllables with a seeded ``random.Random``, so a seed always yields the same
names on every machine (no use of ``hash()``, whose value changes between processes).
"""

from __future__ import annotations

import random

_ONSETS = ("b", "br", "c", "d", "dr", "f", "g", "gr", "h", "k", "kl", "l", "m", "n", "p", "r", "s",
           "st", "t", "tr", "v", "z", "th", "sh", "qu", "j", "w", "y")
_VOWELS = ("a", "e", "i", "o", "u", "ae", "ai", "ei", "ou", "ia", "y")
_CODAS = ("", "", "", "n", "r", "l", "s", "th", "m", "x", "nd", "rk", "st")

PLACE_SUFFIXES = ("ville", "burg", "ford", "haven", "mere", "stad", "grad", "port", "dale", "wick")
COUNTRY_SUFFIXES = ("ia", "land", "stan", "ora", "avia", "enia")
ORG_KINDS = ("Institute", "Industries", "Laboratories", "Foundation", "Company", "Collective",
             "Works", "Systems", "Press", "Guild")
EVENT_KINDS = ("Festival", "Summit", "Fair", "Regatta", "Games", "Congress", "Expo")
WORK_NOUNS = ("River", "Lantern", "Harbor", "Garden", "Mirror", "Winter", "Orchard", "Signal",
              "Tower", "Voyage", "Meadow", "Ember", "Compass", "Tide", "Falcon", "Archive")
WORK_ADJECTIVES = ("Silent", "Hollow", "Crimson", "Distant", "Gilded", "Broken", "Quiet",
                   "Northern", "Last", "Hidden", "Paper", "Velvet", "Iron", "Glass")


class NameForge:
    """Draws unique invented names of several kinds from one seeded generator."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._taken: set[str] = set()

    def _word(self, syllables: int) -> str:
        rng = self._rng
        parts = [rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables)]
        return ("".join(parts) + rng.choice(_CODAS)).capitalize()

    def _unique(self, make) -> str:
        for _ in range(10_000):
            name = make()
            if name not in self._taken:
                self._taken.add(name)
                return name
        raise RuntimeError("name space exhausted; use fewer entities per world")

    def person(self) -> str:
        return self._unique(lambda: f"{self._word(2)} {self._word(self._rng.choice((2, 3)))}")

    def city(self) -> str:
        return self._unique(lambda: self._word(self._rng.choice((1, 2))) + self._rng.choice(PLACE_SUFFIXES))

    def country(self) -> str:
        return self._unique(lambda: self._word(self._rng.choice((1, 2))) + self._rng.choice(COUNTRY_SUFFIXES))

    def organization(self) -> str:
        return self._unique(lambda: f"{self._word(2)} {self._rng.choice(ORG_KINDS)}")

    def work(self) -> str:
        rng = self._rng
        return self._unique(
            lambda: f"The {rng.choice(WORK_ADJECTIVES)} {rng.choice(WORK_NOUNS)} of {self._word(2)}"
        )

    def event(self) -> str:
        return self._unique(lambda: f"{self._word(2)} {self._rng.choice(EVENT_KINDS)}")

    def handle(self) -> str:
        """A lowercase blog handle, e.g. for the author of a blog post."""
        return self._unique(lambda: self._word(2).lower() + str(self._rng.randint(10, 99)))
