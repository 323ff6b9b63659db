"""The paper's four research behaviours as numbers: grounding, cross-checking, reflection, honesty, planning.

DeepResearcher's headline is behaviour, not only accuracy: the agent plans, cross-checks sources, reflects
when a search fails, and says so when the evidence is not there. This module turns one trajectory (and its
task's labels, when the task has them) into a :class:`BehaviourRecord`, and records into rates with the
number of cases behind each rate, so a rate over three episodes reads as such. Definitions and their limits
are in docs/eval.md ("Research behaviours"); in short:

- **grounded**: on world tasks, the answer is a value that a page the agent saw states for the asked entity and
  relation (the world records which page states which fact: a hop's ``evidence_urls`` and ``contradicting_urls``),
  shown in what the agent got from that page (its notes, or its hit's title and snippet); for comparisons and
  yes/no questions, the answer the two values read give. On real questions, the answer (normalized, whole
  tokens) appears in something the agent read. *unsupported* is the rest of the checkable answers.
- **cross-checking**: on world tasks, two pages read (browsed) that state the same fact of the task, each showing
  its value; on real questions, two pages read whose notes hold the answer. Pages and sites read per answer;
  on world ``conflict`` tasks, whether the agent saw and read a reliable page and the contradicting one, which
  it believed, and whether it believed the reliable page when the contradicting one ranked first.
- **reflection**: after the first search whose results hold none of the needed evidence (world tasks: no hit
  is one of the task's evidence URLs; real questions: no gold answer in the hits' text), what came next: a
  search with another query (*reflected*), the same query again, or the answer. Identical tool calls repeated
  within an episode are counted on their own.
- **honesty**: abstention ("cannot find", ``reward.says_cannot_find``) precision and recall against the
  task's answerability.
- **two-entity steps**: on world ``comparison``/``two_page`` tasks, which step of the research failed: whether
  the searches named both entities (the second name is copied from further back), whether both evidence
  pages were read, whether the answer was right when both pages were read and, where the last turn writes
  values out, whether it states each page's value.
- **planning**: on world ``hop2``/``hop3`` tasks, whether every hop's subject was searched, in the order the chain
  allows (``in_order``; ``out_of_order``, ``skipped``): a later hop's subject is only known from the earlier
  page, so this says whether every hop was searched. On real questions (no chain): whether a later query uses a
  name or number first seen in an observation, not in the question (``chained``).

World tasks are labelled by the world (evidence and contradicting URLs, chains); real questions only by the
heuristics above. Everything here is pure: no model, no environment.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from deepresearcher.agent.tools import page_notes
from deepresearcher.agent.trajectory import Trajectory
from deepresearcher.reward import cover_em, is_unanswerable, normalize_answer, says_cannot_find
from deepresearcher.world.pages import site_of
from deepresearcher.world.tasks import comparison_winner

__all__ = [
    "BEHAVIOUR_TAGS",
    "BehaviourRecord",
    "TaskLabels",
    "behaviour_record",
    "behaviour_rates",
    "behaviour_rows",
    "flat_rates",
    "observed_text",
    "rates_by_benchmark",
    "rates_by_type",
    "stuck_rates",
]

PLANNED_TYPES = ("hop2", "hop3")
"""World task types whose chain the planning measure follows."""
TWO_ENTITY_TYPES = ("comparison", "two_page")
"""World task types that need one fact from each of two entities' pages."""
YES_NO = frozenset({"yes", "no"})
"""Answers that any page "contains": not checkable for grounding by the text test (real questions)."""
BEHAVIOUR_TAGS: tuple[str, ...] = (
    "grounded", "unsupported", "abstained", "cross_checked", "reflected", "no_reflection", "repeated_calls",
    "conflict_read_both", "believed_contradicting", "every_hop_searched", "hops_out_of_order", "hop_skipped",
    "entity_not_searched",
)
"""The viewer's behaviour filter values (:attr:`BehaviourRecord.tags`)."""


@dataclass(frozen=True)
class TaskLabels:
    """What a task says about its own research: type, golds, answerability, and the world's labels if any."""

    type: str
    golds: tuple[str, ...]
    answerable: bool | None
    evidence_urls: tuple[str, ...] = ()
    chain: tuple[Mapping[str, Any], ...] = ()  # each hop: subject, relation, value, evidence_urls, contradicting_urls
    question: str = ""

    @property
    def world(self) -> bool:
        """Labelled by the world (evidence URLs, a chain); real questions are not."""
        return bool(self.evidence_urls or self.chain)

    @classmethod
    def from_task(cls, task: Any) -> TaskLabels:
        """From a task dict (a world ``Task.to_dict()``, a training task) or a ``QATask`` (labels in its metadata)."""
        if isinstance(task, Mapping):
            data: Mapping[str, Any] = task
        else:
            data = {**task.metadata, "golds": task.golds, "type": task.metadata.get("type", task.source),
                    "question": task.question}
        golds = tuple(data.get("golds") or data.get("answers") or ())
        answerable = data.get("answerable")
        if answerable is None and golds:
            answerable = not is_unanswerable(golds)
        chain = tuple(h if isinstance(h, Mapping) else asdict(h) for h in data.get("chain") or ())
        return cls(str(data.get("type") or data.get("source") or "task"), golds, answerable,
                   tuple(data.get("evidence_urls") or ()), chain, str(data.get("question") or ""))


@dataclass
class _Call:
    """One tool call as behaviour sees it: what it asked, which URLs it showed or read, what text it returned."""

    name: str
    key: str  # the call itself, normalized: identical calls share it
    queries: list[str] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)  # hits' URLs
    read: list[str] = field(default_factory=list)  # pages browsed without error
    text_by_url: dict[str, str] = field(default_factory=dict)  # what the call showed of each page: hit or notes
    text: str = ""
    failed: bool = False


def _calls(trajectory: Trajectory) -> list[_Call]:
    """The episode's tool calls in order, their observations read from the raw result (either protocol's shape),
    or from the observation text when a record kept no raw result."""
    out = []
    for turn in trajectory.turns:
        call = turn.tool_call
        if call is None:
            continue
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        key = call.name + ":" + "|".join(
            normalize_answer(str(v)) for k in sorted(arguments) for v in _as_list(arguments[k]))
        item = _Call(call.name, key, failed=call.error is not None)
        if not isinstance(call.observation, list):
            item.text = call.text if call.error is None else ""
            item.queries = [str(q) for q in _as_list(arguments.get("query"))]
        else:
            entries = [e for e in call.observation if isinstance(e, dict)]
            item.text = "\n".join(_read_search(item, entries) if call.name == "web_search" else _read_pages(item, entries))
        out.append(item)
    return out


def _read_search(item: _Call, entries: list[dict[str, Any]]) -> list[str]:
    """A search's queries and hits into ``item``; returns what the agent read (titles and snippets)."""
    texts = []
    for entry in entries:
        item.queries.append(str(entry.get("search_query", "")))
        for hit in entry.get("web_page_info_list") or []:
            if isinstance(hit, dict):
                url, said = str(hit.get("url", "")), f"{hit.get('title', '')}\n{hit.get('quick_summary', '')}"
                item.shown.append(url)
                item.text_by_url[url] = item.text_by_url.get(url, "") + "\n" + said
                texts.append(said)
    return texts


def _read_pages(item: _Call, entries: list[dict[str, Any]]) -> list[str]:
    """A browse's pages read without error into ``item``; returns their notes."""
    texts = []
    for entry in entries:
        if "error" in entry:
            continue
        url, notes = str(entry.get("url", "")), page_notes(entry.get("information"))
        item.read.append(url)
        item.text_by_url[url] = item.text_by_url.get(url, "") + "\n" + notes
        texts.append(notes)
    return texts


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


def _covers(text: str, phrase: str) -> bool:
    """``phrase`` as whole normalized tokens inside ``text`` (the cover-EM test)."""
    return bool(phrase.strip()) and bool(cover_em(text, [phrase]))


@dataclass
class BehaviourRecord:
    """One episode's behaviours. ``None`` where a measure does not apply (no answer, not a conflict task, ...)."""

    type: str
    answered: bool
    abstained: bool
    answerable: bool | None
    grounded: bool | None
    pages_read: int
    sites_read: int
    searched: bool = False  # a web_search call (answered or not by the backend) came before the episode ended
    cross_checked: bool | None = None  # two pages read that state the same fact of the task (real: the answer)
    saw_reliable: bool | None = None  # conflict tasks: a reliable page shown or read
    saw_contradicting: bool | None = None  # ... the contradicting page shown or read
    read_reliable: bool | None = None  # ... a reliable page read (browsed)
    read_contradicting: bool | None = None  # ... the contradicting page read
    unreliable_first: bool | None = None  # ... the first search showing the fact ranked the contradicting page first
    believed: str | None = None  # conflict tasks: reliable | contradicting | other
    empty_search: bool = False
    reaction: str | None = None  # after the first empty search: new_query | same_query | answered | ended
    repeated_calls: int = 0
    plan: str | None = None  # world: in_order | out_of_order | skipped | no_search; real: chained | unchained | single | no_search
    world: bool = False
    entities_searched: int | None = None  # two-entity world tasks: entities whose name a query holds
    entities_read: int | None = None  # ... and whose evidence page was read
    correct: bool | None = None  # ... and whether the answer is a gold
    values_stated: list[bool] | None = None  # ... and, when the last turn writes a value out, each entity's value

    @property
    def tags(self) -> list[str]:
        """The viewer's filter values that hold for this episode (``BEHAVIOUR_TAGS``)."""
        flags = {
            "grounded": self.grounded is True, "unsupported": self.grounded is False, "abstained": self.abstained,
            "cross_checked": self.cross_checked is True, "reflected": self.reaction == "new_query",
            "no_reflection": self.reaction in ("same_query", "answered", "ended"),
            "repeated_calls": self.repeated_calls > 0,
            "conflict_read_both": bool(self.read_reliable and self.read_contradicting),
            "believed_contradicting": self.believed == "contradicting",
            "every_hop_searched": self.plan == "in_order", "hops_out_of_order": self.plan == "out_of_order",
            "hop_skipped": self.plan in ("skipped", "no_search") and self.world,
            "entity_not_searched": self.entities_searched is not None and self.entities_searched < 2,
        }
        return [tag for tag in BEHAVIOUR_TAGS if flags[tag]]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "tags": self.tags}


def observed_text(trajectory: Trajectory) -> str:
    """Everything the agent read, in order: hits' titles and snippets, page notes (not its queries, URLs or
    errors). The grounding rule searches it on real questions; the grounding judge reads it."""
    return _read_text([c for c in _calls(trajectory) if not c.failed])


def _read_text(calls: list[_Call]) -> str:
    return "\n".join(c.text for c in calls)


def behaviour_record(trajectory: Trajectory, task: TaskLabels | Any) -> BehaviourRecord:
    """The behaviours of one episode on ``task`` (``TaskLabels``, a task dict or a ``QATask``)."""
    labels = task if isinstance(task, TaskLabels) else TaskLabels.from_task(task)
    calls = [c for c in _calls(trajectory) if not c.failed]
    answer = trajectory.answer
    abstained = says_cannot_find(answer)
    answered = answer is not None and not abstained
    read = list(dict.fromkeys(u for c in calls for u in c.read))
    pages = _Pages(calls)
    if labels.chain:
        checkable = answered and normalize_answer(answer or "") != ""
        grounded = _world_grounded(labels, answer or "", pages, trajectory.question) if checkable else None
        cross_checked = any(len(pages.read_stating(hop)) >= 2 for hop in _asked(labels)) if answered else None
    else:
        checkable = answered and normalize_answer(answer or "") not in YES_NO | {""}
        grounded = _covers(_read_text(calls), answer or "") if checkable else None
        cross_checked = sum(_covers(pages.notes[u], answer or "") for u in read) >= 2 if checkable else None
    record = BehaviourRecord(
        type=labels.type, answered=answer is not None, abstained=abstained, answerable=labels.answerable,
        grounded=grounded, pages_read=len(read), sites_read=len({site_of(u) for u in read}),
        cross_checked=cross_checked, repeated_calls=len(calls) - len({c.key for c in calls}), world=labels.world,
        searched=any(c.name == "web_search" for c in _calls(trajectory)),
    )
    if labels.type == "conflict" and labels.chain:
        _cross_check(record, calls, pages, labels, answer, abstained)
    _reflection(record, calls, labels)
    record.plan = _plan(calls, labels, trajectory.question)
    if labels.type in TWO_ENTITY_TYPES and labels.chain:
        _two_entity_steps(record, calls, labels, answer, trajectory)
    return record


def _asked(labels: TaskLabels) -> tuple[Mapping[str, Any], ...]:
    """The facts a task asks for: both entities' of a two-entity task, else the chain's last (the earlier hops'
    facts are steps to it: reading one hop's page and the next, which names it back, is not a cross-check)."""
    return labels.chain if labels.type in TWO_ENTITY_TYPES else labels.chain[-1:]


class _Pages:
    """What the episode saw of each page: everything (hits' titles and snippets, notes) and the notes of pages read."""

    def __init__(self, calls: list[_Call]) -> None:
        self.seen: dict[str, str] = defaultdict(str)
        self.notes: dict[str, str] = defaultdict(str)
        for call in calls:
            for url, text in call.text_by_url.items():
                self.seen[url] += "\n" + text
                if url in call.read:
                    self.notes[url] += "\n" + text

    @staticmethod
    def stating(hop: Mapping[str, Any]) -> dict[str, str]:
        """The pages that state ``hop``'s fact, each with the value it states (the world's evidence map)."""
        out = {str(u): str(hop.get("contradicting_value")) for u in hop.get("contradicting_urls") or ()}
        out.update({str(u): str(hop.get("value", "")) for u in hop.get("evidence_urls") or ()})
        return out

    def values_seen(self, hop: Mapping[str, Any]) -> list[str]:
        """The values of ``hop``'s fact that the episode was shown, from a page that states it: in that page's hit
        or notes, as whole tokens (``1,234`` = ``1234``)."""
        return list(dict.fromkeys(v for u, v in self.stating(hop).items() if u in self.seen and _covers(self.seen[u], v)))

    def read_stating(self, hop: Mapping[str, Any]) -> list[str]:
        """The pages read (browsed) that state ``hop``'s fact and whose notes show the value they state."""
        return [u for u, v in self.stating(hop).items() if u in self.notes and _covers(self.notes[u], v)]


def _world_grounded(labels: TaskLabels, answer: str, pages: _Pages, question: str) -> bool:
    """The answer is what a page the agent saw states for the asked entity and relation (the last hop's); for a
    comparison or a yes/no question, the answer the values read of both entities give."""
    chain = labels.chain
    if labels.type in TWO_ENTITY_TYPES and len(chain) == 2:
        seen = [pages.values_seen(hop) for hop in chain]
        if labels.type == "two_page":
            given = {"yes" if a == b else "no" for a in seen[0] for b in seen[1]}
            return normalize_answer(answer) in given
        names = [str(hop["subject"]) for hop in chain]
        picked = normalize_answer(answer)
        given = set()
        for a in seen[0]:
            for b in seen[1]:
                try:
                    given.add(normalize_answer(names[comparison_winner(labels.question or question, [int(a), int(b)])]))
                except ValueError:  # not a number, or not a comparison the world asks
                    continue
        return picked in given
    return any(cover_em(answer, [value]) for value in pages.values_seen(chain[-1]))


def _two_entity_steps(record: BehaviourRecord, calls: list[_Call], labels: TaskLabels, answer: str | None,
                      trajectory: Trajectory) -> None:
    queries = [f" {normalize_answer(q)} " for c in calls if c.name == "web_search" for q in c.queries]
    read = {u for c in calls for u in c.read}
    record.entities_searched = sum(any(f" {normalize_answer(str(hop['subject']))} " in q for q in queries)
                                   for hop in labels.chain)
    record.entities_read = sum(any(u in read for u in hop.get("evidence_urls") or ()) for hop in labels.chain)
    record.correct = answer is not None and normalize_answer(answer) in {normalize_answer(g) for g in labels.golds}
    last = trajectory.turns[-1].text if trajectory.turns else ""
    thought = re.sub(r"<[^>]*>", " ", re.sub(r"<answer>.*?(</answer>|$)", " ", last, flags=re.S))  # tags glue words
    stated = [_covers(thought, str(hop.get("value", ""))) for hop in labels.chain]
    # Only a last turn that writes values out can state them (the recipe's "The sources give X." writes none).
    record.values_stated = stated if any(stated) or re.search(r"\d", thought) else None


def _cross_check(record: BehaviourRecord, calls: list[_Call], pages: _Pages, labels: TaskLabels,
                 answer: str | None, abstained: bool) -> None:
    hop = labels.chain[0]
    reliable = {str(u) for u in hop.get("evidence_urls") or ()}
    contradicting = {str(u) for u in hop.get("contradicting_urls") or ()}
    read = {u for c in calls for u in c.read}
    record.saw_reliable = any(u in pages.seen for u in reliable)
    record.saw_contradicting = any(u in pages.seen for u in contradicting)
    record.read_reliable = any(u in read for u in reliable)
    record.read_contradicting = any(u in read for u in contradicting)
    for call in calls:  # the first search that showed a page stating the fact: which kind ranked first
        stating = [u for u in call.shown if u in reliable or u in contradicting]
        if stating:
            record.unreliable_first = stating[0] in contradicting
            break
    if answer is None or abstained:
        return
    wrong = hop.get("contradicting_value")
    if cover_em(answer, list(labels.golds)):
        record.believed = "reliable"
    elif wrong is not None and cover_em(answer, [str(wrong)]):
        record.believed = "contradicting"
    else:
        record.believed = "other"


def _holds_evidence(call: _Call, labels: TaskLabels) -> bool:
    if labels.world:
        needed = {*labels.evidence_urls, *(u for hop in labels.chain for u in hop.get("evidence_urls") or ())}
        return any(u in needed for u in call.shown)
    return any(_covers(call.text, g) for g in labels.golds)


def _reflection(record: BehaviourRecord, calls: list[_Call], labels: TaskLabels) -> None:
    """The first search without the needed evidence, and what followed it (``reaction``)."""
    if not labels.world and not labels.answerable:
        return  # a real question with no answer: "no candidate answer" says nothing
    searches = [c for c in calls if c.name == "web_search"]
    empty = next((i for i, c in enumerate(searches) if not _holds_evidence(c, labels)), None)
    if empty is None:
        return
    record.empty_search = True
    if empty + 1 < len(searches):
        same = searches[empty + 1].key == searches[empty].key
        record.reaction = "same_query" if same else "new_query"
    else:
        record.reaction = "answered" if record.answered else "ended"


_NAME = re.compile(r"\b(?:[A-Z][\w'-]*|\d[\d,.]*)")
_QUESTION_WORDS = frozenset({"who", "what", "when", "where", "which", "why", "how", "is", "was", "did", "does"})


def _plan(calls: list[_Call], labels: TaskLabels, question: str) -> str | None:
    queries = [normalize_answer(q) for c in calls if c.name == "web_search" for q in c.queries]
    if labels.world:
        if labels.type not in PLANNED_TYPES:
            return None
        if not queries:
            return "no_search"
        firsts = []
        for hop in labels.chain:
            subject = normalize_answer(str(hop["subject"]))
            first = next((i for i, q in enumerate(queries) if f" {subject} " in f" {q} "), None)
            if first is None:
                return "skipped"
            firsts.append(first)
        return "in_order" if firsts == sorted(firsts) else "out_of_order"
    return _chained(calls, question)


def _chained(calls: list[_Call], question: str) -> str:
    """Real questions: does a later query use a name or number the agent first read in an observation?"""
    asked = set(normalize_answer(question).split())
    seen = ""
    distinct: set[str] = set()
    for call in calls:
        if call.name == "web_search":
            for query in call.queries:
                distinct.add(normalize_answer(query))
                names = {normalize_answer(m) for m in _NAME.findall(query)} - asked - _QUESTION_WORDS - {""}
                if seen and any(_covers(seen, name) for name in names):
                    return "chained"
        seen += "\n" + call.text
    if not distinct:
        return "no_search"
    return "single" if len(distinct) == 1 else "unchained"


# ---------------------------------------------------------------------------------------------- aggregation


def _rate(hits: int, n: int) -> dict[str, Any]:
    return {"rate": hits / n if n else None, "n": n}


def _mean(values: list[float]) -> dict[str, Any]:
    return {"rate": sum(values) / len(values) if values else None, "n": len(values)}


def behaviour_rates(records: Iterable[BehaviourRecord | Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Rates over episodes, each ``{"rate": fraction or mean (None without cases), "n": cases behind it}``.

    Records may be :class:`BehaviourRecord` or their ``to_dict()`` (as eval records store them); a record with
    ``judged_grounded`` (the judge's label) adds the judge's agreement with the grounding rule.
    """
    rows = [r.to_dict() if isinstance(r, BehaviourRecord) else dict(r) for r in records]
    checked = [r for r in rows if r["grounded"] is not None]
    answered = [r for r in rows if r["answered"] and not r["abstained"]]
    crossed = [r for r in rows if r.get("cross_checked") is not None]
    conflict = [r for r in rows if r.get("saw_reliable") is not None]
    believed = [r for r in conflict if r.get("believed") is not None]
    misled = [r for r in believed if r.get("unreliable_first")]
    read_both = [r for r in believed if r.get("read_reliable") and r.get("read_contradicting")]
    empty = [r for r in rows if r["empty_search"] and r.get("reaction") is not None]
    labelled = [r for r in rows if r["answerable"] is not None]
    abstained = [r for r in labelled if r["abstained"]]
    unanswerable = [r for r in labelled if not r["answerable"]]
    planned = [r for r in rows if r.get("world") and r.get("plan") is not None]
    real_plan = [r for r in rows if not r.get("world") and r.get("plan") not in (None, "no_search")]
    judged = [r for r in checked if r.get("judged_grounded") is not None]
    two = [r for r in rows if r.get("entities_read") is not None]
    both_read = [r for r in two if r["entities_read"] == 2]
    stated = [r for r in both_read if r.get("values_stated") is not None]
    return {
        "episodes": {"rate": None, "n": len(rows)},
        "searched_then_answered": _rate(sum(r["answered"] and r.get("searched", False) for r in rows), len(rows)),
        "grounded": _rate(sum(r["grounded"] for r in checked), len(checked)),
        "unsupported": _rate(sum(not r["grounded"] for r in checked), len(checked)),
        "cross_checked": _rate(sum(r["cross_checked"] for r in crossed), len(crossed)),
        "pages_per_answer": _mean([r["pages_read"] for r in answered]),
        "sites_per_answer": _mean([r["sites_read"] for r in answered]),
        "conflict_saw_both": _rate(sum(r["saw_reliable"] and r["saw_contradicting"] for r in conflict), len(conflict)),
        "conflict_read_both": _rate(sum(bool(r.get("read_reliable") and r.get("read_contradicting")) for r in conflict),
                                    len(conflict)),
        "conflict_believed_reliable": _rate(sum(r["believed"] == "reliable" for r in believed), len(believed)),
        "conflict_believed_contradicting": _rate(sum(r["believed"] == "contradicting" for r in believed), len(believed)),
        "conflict_reliable_when_misled": _rate(sum(r["believed"] == "reliable" for r in misled), len(misled)),
        "conflict_reliable_when_read_both": _rate(sum(r["believed"] == "reliable" for r in read_both), len(read_both)),
        "reflected": _rate(sum(r["reaction"] == "new_query" for r in empty), len(empty)),
        "repeated_query": _rate(sum(r["reaction"] == "same_query" for r in empty), len(empty)),
        "answered_after_empty": _rate(sum(r["reaction"] == "answered" for r in empty), len(empty)),
        "repeated_calls": _mean([r["repeated_calls"] for r in rows]),
        "abstention_precision": _rate(sum(not r["answerable"] for r in abstained), len(abstained)),
        "abstention_recall": _rate(sum(r["abstained"] for r in unanswerable), len(unanswerable)),
        "every_hop_searched": _rate(sum(r["plan"] == "in_order" for r in planned), len(planned)),
        "both_entities_searched": _rate(sum(r["entities_searched"] == 2 for r in two), len(two)),
        "both_pages_read": _rate(sum(r["entities_read"] == 2 for r in two), len(two)),
        "right_when_both_read": _rate(sum(r["correct"] for r in both_read), len(both_read)),
        "first_value_stated": _rate(sum(r["values_stated"][0] for r in stated), len(stated)),
        "second_value_stated": _rate(sum(r["values_stated"][1] for r in stated), len(stated)),
        "plan_chained": _rate(sum(r["plan"] == "chained" for r in real_plan), len(real_plan)),
        "judge_agreement": _rate(sum(r["judged_grounded"] == r["grounded"] for r in judged), len(judged)),
    }


MEANS = frozenset({"pages_per_answer", "sites_per_answer", "repeated_calls"})
"""The rates that are means per episode, not shares: never stuck at 0% or 100%."""


def stuck_rates(sources: Mapping[str, Mapping[str, Mapping[str, Any]]], min_cases: int = 20) -> dict[str, str]:
    """The rates that read the same on every source: 0% on every source with at least ``min_cases`` cases, or 100%
    on every one (``sources``: ``{source: behaviour_rates(...)}``, e.g. the oracle, the baselines and the model).
    A rate that cannot come out otherwise measures nothing; returns ``{rate: "0%" or "100%"}``."""
    stuck = {}
    names = {name for rates in sources.values() for name in rates} - MEANS - {"episodes"}
    for name in sorted(names):
        values = [rates[name]["rate"] for rates in sources.values()
                  if name in rates and rates[name]["n"] >= min_cases and rates[name]["rate"] is not None]
        if values and all(v == 0 for v in values):
            stuck[name] = "0%"
        elif values and all(v == 1 for v in values):
            stuck[name] = "100%"
    return stuck


def rates_by_type(records: Iterable[BehaviourRecord | Mapping[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """:func:`behaviour_rates` per task type (a benchmark's name for real questions), then ``all``."""
    groups: dict[str, list[Any]] = defaultdict(list)
    for record in records:
        kind = record.type if isinstance(record, BehaviourRecord) else record["type"]
        groups[kind].append(record)
    out = {kind: behaviour_rates(groups[kind]) for kind in sorted(groups)}
    out["all"] = behaviour_rates(r for kind in sorted(groups) for r in groups[kind])
    return out


def rates_by_benchmark(records: Iterable[Mapping[str, Any]], order: list[str] | None = None
                       ) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """Eval records (with their ``behaviour``) as ``{benchmark: {type: rates, ..., "all": rates}}``; a benchmark
    of one type (a real one) has its ``all`` only. Records written before behaviours were measured are left out."""
    grouped: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for record in records:
        if record.get("behaviour"):
            grouped[record["benchmark"]].append(record["behaviour"])
    names = [b for b in (order or []) if b in grouped] + sorted(b for b in grouped if b not in (order or []))
    out = {}
    for name in names:
        groups = rates_by_type(grouped[name])
        out[name] = groups if len(groups) > 2 else {"all": groups["all"]}
    return out


def flat_rates(rates: Mapping[str, Mapping[str, Any]], prefix: str = "behaviour/") -> dict[str, float]:
    """Rates as flat numbers for metrics.jsonl and TensorBoard: ``behaviour/grounded`` and ``behaviour/grounded_n``;
    a rate without cases is NaN (metrics.jsonl writes null)."""
    out: dict[str, float] = {}
    for name, value in rates.items():
        if name != "episodes":
            out[prefix + name] = float("nan") if value["rate"] is None else float(value["rate"])
        out[f"{prefix}{name}_n"] = float(value["n"])
    return out


COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("grounded", "grounded", True), ("unsupported", "unsupported", True), ("cross_checked", "cross-checked", True),
    ("pages_per_answer", "pages/answer", False), ("sites_per_answer", "sites/answer", False),
    ("conflict_saw_both", "conflict: saw both", True), ("conflict_read_both", "conflict: read both", True),
    ("conflict_believed_reliable", "conflict: believed reliable", True),
    ("conflict_reliable_when_misled", "conflict: reliable when misled", True),
    ("reflected", "reflected", True), ("repeated_query", "same query again", True),
    ("repeated_calls", "repeated calls", False),
    ("abstention_precision", "abstain P", True), ("abstention_recall", "abstain R", True),
    ("every_hop_searched", "every hop searched", True), ("plan_chained", "chained queries", True),
    ("both_entities_searched", "2 entities: both searched", True), ("both_pages_read", "2 entities: both read", True),
    ("right_when_both_read", "2 entities: right when read", True),
    ("searched_then_answered", "searched, then answered", True),
)
"""The report columns: (rate, title, shown as a percentage)."""


def _cell(value: Mapping[str, Any], percent: bool) -> str:
    if value["rate"] is None:
        return "—"
    shown = f"{100 * value['rate']:.0f}%" if percent else f"{value['rate']:.2f}"
    return f"{shown} ({value['n']})"


def behaviour_rows(groups: Mapping[str, Mapping[str, Mapping[str, Any]]], label: str = "group") -> list[dict[str, str]]:
    """Rows of the behaviour table, one per group (``{group: behaviour_rates(...)}``): each cell ``rate (cases)``,
    ``—`` where no episode gave a case; the judge's agreement only when some group has it."""
    judged = any(g["judge_agreement"]["n"] for g in groups.values())
    columns = [*COLUMNS, *((("judge_agreement", "judge agrees", True),) if judged else ())]
    return [{label: name, "episodes": str(rates["episodes"]["n"]),
             **{title: _cell(rates[key], percent) for key, title, percent in columns}}
            for name, rates in groups.items()]
