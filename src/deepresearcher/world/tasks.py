"""Question tasks over the knowledge base, each with gold answers, aliases, a chain and evidence URLs.

Types:
- ``hop1``, ``hop2``, ``hop3``: follow a chain of relations ("In which city was the founder of X born?").
- ``comparison``: compare one attribute of two entities (needs two pages).
- ``two_page``: a yes/no question that needs one fact from each of two pages.
- ``conflict``: a fact that one unreliable page (a blog, a forum thread, a trivia site) states wrongly; the reliable
  sites' pages (encyclopedia, directory, catalogue) win, and they are the majority. The unreliable page ranks
  above the reliable ones in about half of them (``world.pages``), so answering from the first hit is wrong
  about half the time.
- ``unanswerable``: the fact is on no page; the gold answer is that it cannot be found.

Every task records its chain (the hops a researcher must make, with the natural query for each)
and the URLs of the pages that state each needed fact.

Guessing does not pay: yes/no answers and the position of a comparison's answer alternate, each
comparison is asked both ways (earlier/later, larger/smaller), and no answer is more than
``ANSWER_SHARE`` of the tasks of its type and relation (``eval.baselines`` measures what is left).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from deepresearcher.world.knowledge import RELATIONS, KnowledgeBase
from deepresearcher.world.pages import Evidence

UNANSWERABLE_ANSWER = "cannot find"
TASK_TYPES = ("hop1", "hop2", "hop3", "comparison", "two_page", "conflict", "unanswerable")
# No answer may be more than this share of the tasks of one type and relation (see ``_cap_answers``).
ANSWER_SHARE = 0.05
# Comparisons and yes/no questions, each, per task of the other types: a guess is right half the time
# on both, so they are kept few enough that guessing does not make a world easy.
PAIR_SHARE = 0.06

# Relation paths for multi-hop chains, by the kind of the first subject.
_PATHS_2 = (
    ("founded_by", "born_in"), ("founded_by", "birth_year"), ("founded_by", "occupation"),
    ("creator", "born_in"), ("creator", "birth_year"), ("creator", "occupation"),
    ("organizer", "founded_by"), ("organizer", "headquarters"), ("organizer", "founded_year"),
    ("held_in", "country"), ("held_in", "population"), ("born_in", "country"), ("born_in", "population"),
    ("headquarters", "country"), ("headquarters", "population"),
)
_PATHS_3 = (
    ("creator", "born_in", "country"), ("creator", "born_in", "population"),
    ("founded_by", "born_in", "country"), ("founded_by", "born_in", "population"),
    ("organizer", "founded_by", "born_in"), ("organizer", "founded_by", "birth_year"),
    ("organizer", "headquarters", "country"), ("organizer", "headquarters", "population"),
)


@dataclass
class Hop:
    """One step of a research chain: look up ``relation`` of ``subject``.

    ``evidence_urls`` are every page that states the fact's ``value``; ``contradicting_urls`` every page that
    states ``contradicting_value`` instead (an unreliable site, on a contested fact). Together they are what the
    world knows of which page states this fact (``eval.behaviours`` grounds answers on them); worlds built before
    version 4 have no contradicting pages recorded.
    """

    subject: str
    relation: str
    value: str
    query: str
    evidence_urls: list[str]
    contradicting_urls: list[str] = field(default_factory=list)
    contradicting_value: str | None = None


@dataclass
class Task:
    id: str
    type: str
    question: str
    golds: list[str]
    answerable: bool
    evidence_urls: list[str]
    chain: list[Hop] = field(default_factory=list)
    split: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Task:
        """A task as ``to_dict`` wrote it; worlds built before version 3 name the golds ``answers``."""
        fields = {("golds" if key == "answers" else key): value for key, value in data.items()}
        return cls(**{**fields, "chain": [Hop(**hop) for hop in data.get("chain", [])]})


def _aliases(relation: str, value: str) -> list[str]:
    if RELATIONS[relation].value_kind == "number":
        return [value, f"{int(value):,}"]
    return [value]


class _TaskFactory:
    def __init__(self, kb: KnowledgeBase, evidence: Evidence) -> None:
        self.kb, self.evidence = kb, evidence

    def usable(self, subject: str, relation: str, allow_conflict: bool = False) -> bool:
        fact = self.kb.fact(subject, relation)
        if fact is None or fact.hidden or (fact.wrong_value is not None and not allow_conflict):
            return False
        return bool(self.evidence.supporting.get((subject, relation)))

    def hop(self, subject: str, relation: str) -> Hop:
        fact = self.kb.fact(subject, relation)
        assert fact is not None
        wrong = list(self.evidence.contradicting.get((subject, relation), []))
        return Hop(subject, relation, fact.value, RELATIONS[relation].query.format(s=subject),
                   list(self.evidence.supporting[(subject, relation)]), wrong, fact.wrong_value if wrong else None)

    def chain(self, start: str, path: tuple[str, ...]) -> list[Hop] | None:
        hops, subject = [], start
        for relation in path:
            if not self.usable(subject, relation):
                return None
            hops.append(self.hop(subject, relation))
            subject = hops[-1].value
        return hops

    def unanswerable_task(self, subject: str, relation: str) -> Task:
        """Ask for a hidden fact; the subject's own article is the page that (fails to) answer."""
        article = self.evidence.supporting.get((subject, RELATIONS_ANY[self.kb.entities[subject].kind]), [])
        rel = RELATIONS[relation]
        return Task("", "unanswerable", rel.question.format(s=subject), [UNANSWERABLE_ANSWER], False,
                    list(article[:1]), [Hop(subject, relation, "", rel.query.format(s=subject), [])])

    def chain_task(self, hops: list[Hop], kind: str) -> Task:
        noun = hops[0].subject
        for hop in hops[:-1]:
            noun = RELATIONS[hop.relation].noun.format(s=noun)
        question = RELATIONS[hops[-1].relation].question.format(s=noun)
        return Task("", kind, question, _aliases(hops[-1].relation, hops[-1].value), True,
                    _dedup(u for h in hops for u in h.evidence_urls[:1]), hops)


def _dedup(urls) -> list[str]:
    return list(dict.fromkeys(urls))


def generate_tasks(kb: KnowledgeBase, evidence: Evidence, rng: random.Random) -> list[Task]:
    """The tasks of every type (chains capped by ``_cap_answers``), in a seeded order."""
    f = _TaskFactory(kb, evidence)
    tasks: dict[str, list[Task]] = {t: [] for t in TASK_TYPES}
    for (subject, relation), fact in sorted(kb.facts.items()):
        if f.usable(subject, relation):
            tasks["hop1"].append(f.chain_task([f.hop(subject, relation)], "hop1"))
        elif fact.hidden:
            tasks["unanswerable"].append(f.unanswerable_task(subject, relation))
        elif fact.wrong_value is not None and f.usable(subject, relation, allow_conflict=True):
            task = f.chain_task([f.hop(subject, relation)], "conflict")
            task.evidence_urls = list(evidence.supporting[(subject, relation)])
            tasks["conflict"].append(task)
    for entity in sorted(kb.entities):
        for path in _PATHS_2:
            if (hops := f.chain(entity, path)) is not None:
                tasks["hop2"].append(f.chain_task(hops, "hop2"))
        for path in _PATHS_3:
            if (hops := f.chain(entity, path)) is not None:
                tasks["hop3"].append(f.chain_task(hops, "hop3"))
    for kind in ("hop1", "hop2", "hop3", "conflict"):
        tasks[kind] = _cap_answers(tasks[kind])
    n_pairs = max(10, round(PAIR_SHARE * sum(len(group) for group in tasks.values())))
    tasks["comparison"] = _comparisons(kb, f, rng, n_pairs)
    tasks["two_page"] = _same_place(kb, f, rng, n_pairs)
    ordered = [t for kind in TASK_TYPES for t in tasks[kind]]
    rng.shuffle(ordered)
    return ordered


# The relation whose evidence page is an entity's own encyclopedia article (any always-stated fact).
RELATIONS_ANY = {"person": "born_in", "organization": "founded_by", "work": "creator", "city": "country",
                 "event": "held_in"}

# (entity kind, relation, question template, which value wins). Each attribute is asked both ways, so
# neither the wording nor the order of the two names says which one is the answer.
COMPARISONS = (
    ("person", "birth_year", "Who was born earlier, {a} or {b}?", min),
    ("person", "birth_year", "Who was born later, {a} or {b}?", max),
    ("city", "population", "Which city has the larger population, {a} or {b}?", max),
    ("city", "population", "Which city has the smaller population, {a} or {b}?", min),
    ("organization", "founded_year", "Which organization was founded earlier, {a} or {b}?", min),
    ("organization", "founded_year", "Which organization was founded later, {a} or {b}?", max),
    ("work", "release_year", "Which was released earlier, {a} or {b}?", min),
    ("work", "release_year", "Which was released later, {a} or {b}?", max),
)


def comparison_pick(question: str) -> Callable[[list[int]], int]:
    """``max`` or ``min``: what a comparison question asks for (the later or larger value, or the earlier or smaller)."""
    for _, _, template, pick in COMPARISONS:
        if question.startswith(template.split("{a}")[0]):
            return pick
    raise ValueError(f"not a comparison question of the world: {question!r}")


def comparison_winner(question: str, values: list[int]) -> int:
    """The index of the value a comparison question asks for (the earlier, later, larger or smaller one)."""
    return values.index(comparison_pick(question)(values))


def _comparisons(kb: KnowledgeBase, f: _TaskFactory, rng: random.Random, n: int) -> list[Task]:
    """``n`` comparisons; per question template, the answer is the first name in exactly every other one."""
    out: list[Task] = []
    seen: set[str] = set()
    made: Counter[str] = Counter()
    for _ in range(n * 4):
        if len(out) >= n:
            break
        kind, relation, template, pick = rng.choice(COMPARISONS)
        names = sorted(e.name for e in kb.of_kind(kind) if f.usable(e.name, relation))
        if len(names) < 2:
            continue
        a, b = rng.sample(names, 2)
        va, vb = int(kb.facts[(a, relation)].value), int(kb.facts[(b, relation)].value)
        if va == vb:
            continue
        first_wins = made[template] % 2 == 0
        if (pick(va, vb) == va) != first_wins:
            a, b = b, a
        question = template.format(a=a, b=b)
        if question in seen:
            continue
        seen.add(question)
        made[template] += 1
        hops = [f.hop(a, relation), f.hop(b, relation)]
        out.append(Task("", "comparison", question, [a if first_wins else b], True,
                        _dedup(h.evidence_urls[0] for h in hops), hops))
    return out


SAME_CITY = "Were {a} and {b} born in the same city?"
"""The question of a ``two_page`` task: yes when both people's ``born_in`` is the same city."""


def _same_place(kb: KnowledgeBase, f: _TaskFactory, rng: random.Random, n: int) -> list[Task]:
    """``n`` yes/no questions about two people's birthplaces: exactly every other answer is "yes"."""
    people = sorted(e.name for e in kb.of_kind("person") if f.usable(e.name, "born_in"))
    city = {p: kb.facts[(p, "born_in")].value for p in people}
    out: list[Task] = []
    seen: set[tuple[str, str]] = set()
    for _ in range(n * 4):
        if len(out) >= n:
            break
        a = rng.choice(people)
        want_yes = len(out) % 2 == 0
        others = [p for p in people if p != a and (city[p] == city[a]) == want_yes]
        if not others:
            continue
        b = rng.choice(others)
        if (a, b) in seen:
            continue
        seen.add((a, b))
        hops = [f.hop(a, "born_in"), f.hop(b, "born_in")]
        out.append(Task("", "two_page", SAME_CITY.format(a=a, b=b), ["yes" if want_yes else "no"],
                        True, _dedup(h.evidence_urls[0] for h in hops), hops))
    return out


def _cap_answers(tasks: list[Task], share: float = ANSWER_SHARE) -> list[Task]:
    """Drop the tasks that make one answer more than ``share`` of its (type, relation) group.

    A chain's last hop decides its answer, and chains funnel into a few popular values (the country of
    the city where many people were born), which a model could learn to guess without reading. The
    largest count ``c`` per answer with ``c <= share * kept(c)`` is kept, in the tasks' order; a group
    with too few distinct answers for that keeps one task per answer.
    """
    groups: dict[tuple[str, str], list[Task]] = {}
    for task in tasks:
        groups.setdefault((task.type, task.chain[-1].relation), []).append(task)
    keep: set[int] = set()
    for group in groups.values():
        counts = Counter(t.golds[0] for t in group)
        cap = max([c for c in range(1, max(counts.values()) + 1)
                   if c <= share * sum(min(n, c) for n in counts.values())], default=1)
        used: Counter[str] = Counter()
        for task in group:
            used[task.golds[0]] += 1
            if used[task.golds[0]] <= cap:
                keep.add(id(task))
    return [t for t in tasks if id(t) in keep]


def _binary_label(task: Task) -> str:
    """What a guess of a two-way task could exploit: the yes/no answer, or which name wins."""
    return task.golds[0] if task.type == "two_page" else str(task.golds[0] == task.chain[0].subject)


def _interleaved(group: list[Task]) -> list[Task]:
    """``group`` reordered to alternate its labels (yes, no, yes, ...), so every slice of it is balanced."""
    by_label: dict[str, list[Task]] = {}
    for task in group:
        by_label.setdefault(_binary_label(task), []).append(task)
    columns = list(by_label.values())
    return [col[i] for i in range(max(map(len, columns), default=0)) for col in columns if i < len(col)]


def split_tasks(tasks: list[Task], prefix: str, fractions=(0.8, 0.1, 0.1)) -> dict[str, list[Task]]:
    """Number tasks and split them into train/dev/test, each type spread evenly over the splits.

    Within a split the tasks keep their (shuffled) order, so a prefix (``eval --limit``) mixes the types;
    yes/no questions and comparisons are balanced within every split, not only over the world.
    """
    seen: set[str] = set()
    by_type: dict[str, list[Task]] = {t: [] for t in TASK_TYPES}
    for task in tasks:
        if task.question not in seen:
            seen.add(task.question)
            by_type[task.type].append(task)
    for kind in TASK_TYPES:
        group = _interleaved(by_type[kind]) if kind in ("two_page", "comparison") else by_type[kind]
        n_dev = round(len(group) * fractions[1])
        n_test = round(len(group) * fractions[2])
        for i, task in enumerate(group):
            task.split = "test" if i < n_test else "dev" if i < n_test + n_dev else "train"
    splits: dict[str, list[Task]] = {"train": [], "dev": [], "test": []}
    for task in tasks:
        if task.split:
            splits[task.split].append(task)
    for name, group in splits.items():
        for i, task in enumerate(group):
            task.id = f"{prefix}-{name}-{i:05d}"
    return splits
