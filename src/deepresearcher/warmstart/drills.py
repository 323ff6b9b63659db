"""Check drills: the last step of a two-entity task, alone and many times over, as extra SFT rows.

Why they exist: on ``comparison`` and ``two_page`` tasks the quickstart's small model reads both pages and,
with ``train.sft.two_entity_order: noted``, writes both values side by side in its last thought, and then
answers at chance (docs/train.md, "Two-entity tasks"). The failing step is the check itself (is 1879 before
1960? is Baiburg Baiburg?), and a demonstration episode holds ~500 tokens for the one answer token that
trains it. A drill is that last step only: the question, the oracle's last thought with both values
(``train.oracle.values_thought``) and the answer, the values drawn from a training world's facts. Only the answer
carries loss: the drill's question and thought are context, so the model never learns to write values it
has not read. ``train.sft.check_drills`` of them are packed into rows beside every SFT batch.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from deepresearcher.train.oracle import values_thought
from deepresearcher.world.tasks import COMPARISONS, SAME_CITY, comparison_winner

Row = tuple[list[int], list[float]]
"""Token ids and their loss weights."""


@dataclass(frozen=True)
class Drill:
    """A two-entity task's question, its values, and the answer they give."""

    question: str
    subjects: tuple[str, str]
    values: tuple[str, str]
    answer: str

    def thought(self, terse: bool) -> str:
        """The oracle's last thought on this task (what the agent writes before its answer)."""
        return values_thought(list(self.subjects), list(self.values), self.answer, terse)


def world_facts(world_dir: Path) -> dict[str, dict[str, str]]:
    """A built world's stated facts (hidden ones left out) as ``{relation: {subject: value}}``."""
    facts: dict[str, dict[str, str]] = {}
    with (Path(world_dir) / "knowledge.jsonl").open("rb") as lines:
        for line in lines:
            fact = orjson.loads(line)
            if not fact["hidden"]:
                facts.setdefault(fact["relation"], {})[fact["subject"]] = fact["value"]
    return facts


def check_drills(world_dirs: list[Path], count: int, seed: int) -> list[Drill]:
    """``count`` drills from the facts of ``world_dirs`` (the training worlds): comparisons and same-city
    questions in turn, the latter "yes" every other time, as the worlds' own tasks are balanced."""
    if count <= 0:
        return []
    rng = random.Random(seed)
    worlds = [world_facts(d) for d in world_dirs]
    drills: list[Drill] = []
    while len(drills) < count:
        facts = rng.choice(worlds)
        drill = _same_city(facts, rng, want_yes=len(drills) % 4 == 1) if len(drills) % 2 else _comparison(facts, rng)
        if drill is not None:
            drills.append(drill)
    return drills


def _comparison(facts: dict[str, dict[str, str]], rng: random.Random) -> Drill | None:
    _, relation, template, _ = rng.choice(COMPARISONS)
    values = facts.get(relation, {})
    if len(values) < 2:
        return None
    a, b = rng.sample(sorted(values), 2)
    if int(values[a]) == int(values[b]):
        return None
    question = template.format(a=a, b=b)
    winner = comparison_winner(question, [int(values[a]), int(values[b])])
    return Drill(question, (a, b), (values[a], values[b]), (a, b)[winner])


def _same_city(facts: dict[str, dict[str, str]], rng: random.Random, want_yes: bool) -> Drill | None:
    born = facts.get("born_in", {})
    people = sorted(born)
    if len(people) < 2:
        return None
    a = rng.choice(people)
    others = [p for p in people if p != a and (born[p] == born[a]) == want_yes]
    if not others:
        return None
    b = rng.choice(others)
    return Drill(SAME_CITY.format(a=a, b=b), (a, b), (born[a], born[b]), "yes" if want_yes else "no")


def drill_rows(drills: list[Drill], template: Any, terse: bool) -> list[Row]:
    """Each drill as the rollout engine lays out a one-turn episode (``template``'s prompt, then the turn
    ``thought</think>\\n<answer>answer</answer>``, where the engine stops it), weight 1 on the tokens from the answer on and 0 before.

    The turn is tokenized whole, as the engine tokenizes a sampled turn, and split after ``<answer>``; where the
    tokenizer merged the tag's end with the answer's start, before that token (its loss then covers a ``>`` too)."""
    rows: list[Row] = []
    for drill in drills:
        prompt = template.prompt_ids(drill.question)
        head = f"{drill.thought(terse)}</think>\n<answer>"
        turn = template.encode(f"{head}{drill.answer}</answer>")
        head_ids = template.encode(head)
        cut = len(head_ids)
        if turn[:cut] != head_ids:  # the answer's first token merged with the tag: cut before it
            cut = next(k for k in range(1, len(turn) + 1) if "<answer>" in template.tokenizer.decode(turn[:k])) - 1
        rows.append((prompt + turn, [0.0] * (len(prompt) + cut) + [1.0] * (len(turn) - cut)))
    return rows


def pack(rows: list[Row], width: int) -> list[Row]:
    """``rows`` concatenated, in order, into as few rows of at most ``width`` tokens as fit them whole (a row
    longer than ``width`` gets one of its own, cut to it). Causal attention lets a drill see the ones packed
    before it; each carries its own question, so none needs them."""
    packed: list[Row] = []
    ids: list[int] = []
    weights: list[float] = []
    for row_ids, row_weights in rows:
        if ids and len(ids) + len(row_ids) > width:
            packed.append((ids, weights))
            ids, weights = [], []
        ids, weights = ids + row_ids[:width], weights + row_weights[:width]
    if ids:
        packed.append((ids, weights))
    return packed
