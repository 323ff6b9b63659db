"""The knowledge base behind the synthetic web: entities and the typed facts that link them.

Facts are the ground truth. Pages (``pages.py``) render some of them, sometimes wrongly
(``Fact.wrong_value``: an outdated or careless source), and some facts on no page at all
(``Fact.hidden``), which is what makes unanswerable questions honest.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from deepresearcher.world.names import NameForge

ENTITY_KINDS = ("person", "city", "country", "organization", "work", "event")

# Forty occupations, so that no single one is a good guess (each is ~2.5% of the occupation answers).
OCCUPATIONS = ("architect", "cartographer", "chemist", "composer", "economist", "engineer", "historian",
               "linguist", "novelist", "painter", "physician", "poet", "sculptor", "astronomer", "botanist",
               "actor", "archivist", "astronaut", "baker", "biologist", "carpenter", "choreographer",
               "diplomat", "editor", "geologist", "illustrator", "journalist", "jeweller", "lawyer",
               "librarian", "mathematician", "musician", "navigator", "pharmacist", "philosopher",
               "photographer", "pilot", "surgeon", "translator", "zoologist")
INDUSTRIES = ("shipbuilding", "textiles", "software", "publishing", "mining", "aviation", "brewing",
              "pharmaceuticals", "robotics", "agriculture")
WORK_KINDS = ("film", "novel", "album")


@dataclass(frozen=True)
class Relation:
    """A typed relation: which kind of subject it has, and what kind of value."""

    name: str
    subject: str
    value_kind: str  # an entity kind, or "year", "number", "text"
    question: str  # question template with {s}
    noun: str  # noun phrase template with {s}, used to chain hops: "the founder of {s}"
    query: str  # the natural search query a researcher would type, with {s}
    sentence: str  # how an encyclopedia states it, with {s} and {v}


RELATIONS: dict[str, Relation] = {r.name: r for r in (
    Relation("born_in", "person", "city", "In which city was {s} born?", "the birthplace of {s}",
             "{s} birthplace", "{s} was born in {v}."),
    Relation("birth_year", "person", "year", "In what year was {s} born?", "the birth year of {s}",
             "{s} born year", "{s} was born in the year {v}."),
    Relation("occupation", "person", "text", "What is the occupation of {s}?", "the occupation of {s}",
             "{s} occupation", "{s} works as a {v}."),
    Relation("country", "city", "country", "In which country is {s} located?", "the country of {s}",
             "{s} country", "{s} is a city in {v}."),
    Relation("population", "city", "number", "What is the population of {s}?", "the population of {s}",
             "{s} population", "{s} has a population of {v}."),
    Relation("founded_by", "organization", "person", "Who founded {s}?", "the founder of {s}",
             "{s} founder", "{s} was founded by {v}."),
    Relation("headquarters", "organization", "city", "In which city is {s} headquartered?",
             "the headquarters city of {s}", "{s} headquarters", "{s} is headquartered in {v}."),
    Relation("founded_year", "organization", "year", "In what year was {s} founded?",
             "the founding year of {s}", "{s} founded year", "{s} was established in {v}."),
    Relation("creator", "work", "person", "Who created {s}?", "the creator of {s}",
             "{s} creator", "{s} was created by {v}."),
    Relation("release_year", "work", "year", "In what year was {s} released?", "the release year of {s}",
             "{s} release year", "{s} was released in {v}."),
    Relation("held_in", "event", "city", "In which city is {s} held?", "the host city of {s}",
             "{s} host city", "{s} is held in {v}."),
    Relation("organizer", "event", "organization", "Which organization organizes {s}?",
             "the organizer of {s}", "{s} organizer", "{s} is organized by {v}."),
)}


@dataclass
class Fact:
    """One true statement ``subject --relation--> value`` and how the web treats it."""

    subject: str
    relation: str
    value: str
    hidden: bool = False  # stated on no page
    wrong_value: str | None = None  # a contradicting source states this instead


@dataclass
class Entity:
    name: str
    kind: str
    attributes: dict[str, str] = field(default_factory=dict)  # untyped extras: kind of work, industry


@dataclass
class KnowledgeBase:
    entities: dict[str, Entity] = field(default_factory=dict)
    facts: dict[tuple[str, str], Fact] = field(default_factory=dict)
    _inverse: dict[tuple[str, str], list[str]] | None = field(default=None, repr=False)

    def add(self, entity: Entity) -> None:
        self.entities[entity.name] = entity

    def of_kind(self, kind: str) -> list[Entity]:
        return [e for e in self.entities.values() if e.kind == kind]

    def fact(self, subject: str, relation: str) -> Fact | None:
        return self.facts.get((subject, relation))

    def facts_of(self, subject: str) -> list[Fact]:
        return [f for r in RELATIONS if (f := self.facts.get((subject, r))) is not None]

    def inverse(self, relation: str, value: str) -> list[str]:
        """Subjects whose ``relation`` has ``value`` (e.g. the organizations a person founded), sorted."""
        if self._inverse is None:
            index: dict[tuple[str, str], list[str]] = {}
            for (subject, rel), fact in self.facts.items():
                index.setdefault((rel, fact.value), []).append(subject)
            self._inverse = {k: sorted(v) for k, v in index.items()}
        return self._inverse.get((relation, value), [])

    def set_fact(self, subject: str, relation: str, value: str) -> None:
        self.facts[(subject, relation)] = Fact(subject, relation, value)
        self._inverse = None


# Entities per kind for each world size. Countries are numerous enough (30 from ``small`` up, each with
# a city) that no country is a good guess for a question whose answer is a country.
SIZES: dict[str, dict[str, int]] = {
    "tiny": {"country": 4, "city": 10, "person": 30, "organization": 10, "work": 10, "event": 6},
    "small": {"country": 30, "city": 60, "person": 220, "organization": 60, "work": 60, "event": 30},
    "medium": {"country": 80, "city": 300, "person": 1100, "organization": 300, "work": 300, "event": 150},
    "large": {"country": 200, "city": 1200, "person": 5500, "organization": 1500, "work": 1500, "event": 750},
}

# Years are drawn so that no cap is needed: births 1840-1965, founding 22-55 years after the founder's
# birth (at most 2020), release 20-59 years after the creator's (at most 2024). A cap would pile the
# answers of later entities on one year, which a model could learn to guess.
BIRTH_YEARS = (1840, 1965)
FOUNDED_AFTER_BIRTH = (22, 55)
RELEASED_AFTER_BIRTH = (20, 59)


def generate_knowledge(rng: random.Random, size: str, hidden_rate: float = 0.06,
                       conflict_rate: float = 0.12, names: NameForge | None = None) -> KnowledgeBase:
    """Draw entities and facts for a world of ``size``; a share of facts is hidden or contradicted.

    ``names`` draws the entity names from its own generator: worlds that share it have the same
    entities with different facts, so a model trained on one cannot answer another from memory.
    """
    counts = SIZES[size]
    forge = names or NameForge(rng)
    kb = KnowledgeBase()
    countries = [forge.country() for _ in range(counts["country"])]
    for name in countries:
        kb.add(Entity(name, "country"))
    cities = [forge.city() for _ in range(counts["city"])]
    for i, name in enumerate(cities):  # the first cities go one to each country, so no country is empty
        kb.add(Entity(name, "city"))
        kb.set_fact(name, "country", countries[i] if i < len(countries) else rng.choice(countries))
        kb.set_fact(name, "population", str(rng.randrange(8_000, 4_000_000, 100)))
    people = [forge.person() for _ in range(counts["person"])]
    for name in people:
        kb.add(Entity(name, "person"))
        kb.set_fact(name, "born_in", rng.choice(cities))
        kb.set_fact(name, "birth_year", str(rng.randint(*BIRTH_YEARS)))
        kb.set_fact(name, "occupation", rng.choice(OCCUPATIONS))
    orgs = [forge.organization() for _ in range(counts["organization"])]
    for name in orgs:
        kb.add(Entity(name, "organization", {"industry": rng.choice(INDUSTRIES)}))
        founder = rng.choice(people)
        kb.set_fact(name, "founded_by", founder)
        kb.set_fact(name, "headquarters", rng.choice(cities))
        born = int(kb.facts[(founder, "birth_year")].value)
        kb.set_fact(name, "founded_year", str(born + rng.randint(*FOUNDED_AFTER_BIRTH)))
    for _ in range(counts["work"]):
        name = forge.work()
        kb.add(Entity(name, "work", {"kind": rng.choice(WORK_KINDS)}))
        creator = rng.choice(people)
        kb.set_fact(name, "creator", creator)
        born = int(kb.facts[(creator, "birth_year")].value)
        kb.set_fact(name, "release_year", str(born + rng.randint(*RELEASED_AFTER_BIRTH)))
    for _ in range(counts["event"]):
        name = forge.event()
        kb.add(Entity(name, "event"))
        kb.set_fact(name, "held_in", rng.choice(cities))
        kb.set_fact(name, "organizer", rng.choice(orgs))
    _mark_hidden_and_conflicting(kb, rng, hidden_rate, conflict_rate)
    return kb


# Only these relations may be hidden or contradicted: hiding a link (born_in, founded_by, ...)
# would break chains, while a year or a number is a natural thing for the web to omit or get wrong.
_HIDEABLE = ("birth_year", "founded_year", "release_year", "occupation")
_CONTESTABLE = ("population", "founded_year", "birth_year", "release_year")


def _mark_hidden_and_conflicting(kb: KnowledgeBase, rng: random.Random, hidden_rate: float,
                                 conflict_rate: float) -> None:
    for fact in kb.facts.values():
        roll = rng.random()
        if fact.relation in _HIDEABLE and roll < hidden_rate:
            fact.hidden = True
        elif fact.relation in _CONTESTABLE and roll < hidden_rate + conflict_rate:
            fact.wrong_value = _wrong(fact, rng)


def _wrong(fact: Fact, rng: random.Random) -> str:
    value = int(fact.value)
    if fact.relation == "population":
        return str(max(1000, value + rng.choice((-1, 1)) * rng.randrange(5_000, max(6_000, value // 3), 100)))
    return str(value + rng.choice((-1, 1)) * rng.randint(2, 9))
