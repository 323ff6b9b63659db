"""The paper's four research behaviours as numbers: grounding, cross-checking, reflection, honesty, planning.

DeepResearcher's headline is behaviour, not only accuracy: the agent plans, cross-checks sources, reflects
when a search fails, and says so when the evidence is not there. This module turns one trajectory (and its
task's labels, when the task has them) into a :class:`BehaviourRecord`, and records into rates with the
number of cases behind each rate, so a rate over three episodes reads as such. Definitions and their limits
are in docs/eval.md ("Research behaviours"); in short:

- **grounded**: the answer (normalized, whole tokens) appears in some observation the agent read before
  answering (search titles and snippets, page notes); *unsupported* is the rest of the checkable answers.
  Abstentions and yes/no answers are not checkable.
- **cross-checking**: distinct pages and sites read (browsed) per answer; on world ``conflict`` tasks, whether
  the agent saw (as a hit or a read page) a reliable page and the contradicting blog post, and which it believed.
- **reflection**: after the first search whose results hold none of the needed evidence (world tasks: no hit
  is one of the task's evidence URLs; real questions: no gold answer in the hits' text), what came next: a
  search with another query (*reflected*), the same query again, or the answer. Identical tool calls repeated
  within an episode are counted on their own.
- **honesty**: abstention ("cannot find", ``reward.says_cannot_find``) precision and recall against the
  task's answerability.
- **two-entity steps**: on world ``comparison``/``two_page`` tasks, which step of the research failed: whether
  the searches named both entities (the second name is copied from further back), whether both evidence
  pages were read, whether the last turn states each page's value (when the agent writes them out) and whether
  the answer was right when both pages were read.
- **planning**: on world ``hop2``/``hop3`` tasks, whether the searches name each hop's subject, first mentions
  in the chain's order (``in_order``, ``out_of_order``, ``skipped``). On real questions (no chain): whether a
  later query uses a name or number first seen in an observation, not in the question (``chained``).

World tasks are labelled by the world (evidence URLs, chains, the contradicting page); real questions only by
the heuristics above. Everything here is pure: no model, no environment.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

from deepresearcher.agent.tools import page_notes
from deepresearcher.agent.trajectory import Trajectory
from deepresearcher.reward import cover_em, is_unanswerable, normalize_answer, says_cannot_find
from deepresearcher.world.pages import BLOG_HOST, blog_post_path

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
]

PLANNED_TYPES = ("hop2", "hop3")
"""World task types whose chain the planning measure follows."""
TWO_ENTITY_TYPES = ("comparison", "two_page")
"""World task types that need one fact from each of two entities' pages."""
YES_NO = frozenset({"yes", "no"})
"""Answers that any page "contains": not checkable for grounding."""
BEHAVIOUR_TAGS: tuple[str, ...] = (
    "grounded", "unsupported", "abstained", "cross_checked", "reflected", "no_reflection", "repeated_calls",
    "believed_contradicting", "plan_in_order", "plan_out_of_order", "plan_skipped", "entity_not_searched",
)
"""The viewer's behaviour filter values (:attr:`BehaviourRecord.tags`)."""


@dataclass(frozen=True)
class TaskLabels:
    """What a task says about its own research: type, golds, answerability, and the world's labels if any."""

    type: str
    golds: tuple[str, ...]
    answerable: bool | None
    evidence_urls: tuple[str, ...] = ()
    chain: tuple[Mapping[str, Any], ...] = ()  # each hop: subject, relation, value, evidence_urls

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
            data = {**task.metadata, "golds": task.golds, "type": task.metadata.get("type", task.source)}
        golds = tuple(data.get("golds") or data.get("answers") or ())
        answerable = data.get("answerable")
        if answerable is None and golds:
            answerable = not is_unanswerable(golds)
        chain = tuple(h if isinstance(h, Mapping) else asdict(h) for h in data.get("chain") or ())
        return cls(str(data.get("type") or data.get("source") or "task"), golds, answerable,
                   tuple(data.get("evidence_urls") or ()), chain)


@dataclass
class _Call:
    """One tool call as behaviour sees it: what it asked, which URLs it showed or read, what text it returned."""

    name: str
    key: str  # the call itself, normalized: identical calls share it
    queries: list[str] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)  # hits' URLs
    read: list[str] = field(default_factory=list)  # pages browsed without error
    text_by_url: dict[str, str] = field(default_factory=dict)
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
    saw_reliable: bool | None = None
    saw_contradicting: bool | None = None
    believed: str | None = None  # conflict tasks: reliable | contradicting | other
    empty_search: bool = False
    reaction: str | None = None  # after the first empty search: new_query | same_query | answered | ended
    repeated_calls: int = 0
    plan: str | None = None  # world: in_order | out_of_order | skipped | no_search; real: chained | unchained | single | no_search
    world: bool = False
    entities_searched: int | None = None  # two-entity world tasks: entities whose name a query holds
    entities_read: int | None = None  # ... and whose evidence page was read
    correct: bool | None = None  # ... and whether the answer is a gold
    values_stated: list[bool] | None = None  # ... and whether the last turn's text states each entity's value

    @property
    def tags(self) -> list[str]:
        """The viewer's filter values that hold for this episode (``BEHAVIOUR_TAGS``)."""
        flags = {
            "grounded": self.grounded is True, "unsupported": self.grounded is False, "abstained": self.abstained,
            "cross_checked": self.pages_read >= 2, "reflected": self.reaction == "new_query",
            "no_reflection": self.reaction in ("same_query", "answered", "ended"),
            "repeated_calls": self.repeated_calls > 0, "believed_contradicting": self.believed == "contradicting",
            "plan_in_order": self.plan == "in_order", "plan_out_of_order": self.plan == "out_of_order",
            "plan_skipped": self.plan == "skipped",
            "entity_not_searched": self.entities_searched is not None and self.entities_searched < 2,
        }
        return [tag for tag in BEHAVIOUR_TAGS if flags[tag]]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "tags": self.tags}


def observed_text(trajectory: Trajectory) -> str:
    """Everything the agent read, in order: hits' titles and snippets, page notes (not its queries, URLs or
    errors). The grounding rule searches it; the grounding judge reads it."""
    return _read_text([c for c in _calls(trajectory) if not c.failed])


def _read_text(calls: list[_Call]) -> str:
    return "\n".join(c.text for c in calls)


def behaviour_record(trajectory: Trajectory, task: TaskLabels | Any) -> BehaviourRecord:
    """The behaviours of one episode on ``task`` (``TaskLabels``, a task dict or a ``QATask``)."""
    labels = task if isinstance(task, TaskLabels) else TaskLabels.from_task(task)
    calls = [c for c in _calls(trajectory) if not c.failed]
    answer = trajectory.answer
    abstained = says_cannot_find(answer)
    seen_text = _read_text(calls)
    checkable = answer is not None and not abstained and normalize_answer(answer) not in YES_NO | {""}
    read = list(dict.fromkeys(u for c in calls for u in c.read))
    record = BehaviourRecord(
        type=labels.type, answered=answer is not None, abstained=abstained, answerable=labels.answerable,
        grounded=_covers(seen_text, answer or "") if checkable else None,
        pages_read=len(read), sites_read=len({urlsplit(u).hostname or u for u in read}),
        repeated_calls=len(calls) - len({c.key for c in calls}), world=labels.world,
        searched=any(c.name == "web_search" for c in _calls(trajectory)),
    )
    if labels.type == "conflict" and labels.chain:
        _cross_check(record, calls, labels, answer, abstained)
    _reflection(record, calls, labels)
    record.plan = _plan(calls, labels, trajectory.question)
    if labels.type in TWO_ENTITY_TYPES and labels.chain:
        _two_entity_steps(record, calls, labels, answer, trajectory)
    return record


def _two_entity_steps(record: BehaviourRecord, calls: list[_Call], labels: TaskLabels, answer: str | None,
                      trajectory: Trajectory) -> None:
    queries = [f" {normalize_answer(q)} " for c in calls if c.name == "web_search" for q in c.queries]
    read = {u for c in calls for u in c.read}
    record.entities_searched = sum(any(f" {normalize_answer(str(hop['subject']))} " in q for q in queries)
                                   for hop in labels.chain)
    record.entities_read = sum(any(u in read for u in hop.get("evidence_urls") or ()) for hop in labels.chain)
    record.correct = answer is not None and normalize_answer(answer) in {normalize_answer(g) for g in labels.golds}
    last = re.sub(r"<[^>]*>", " ", trajectory.turns[-1].text) if trajectory.turns else ""  # tags glue words
    record.values_stated = [_covers(last, str(hop.get("value", ""))) for hop in labels.chain]


def _cross_check(record: BehaviourRecord, calls: list[_Call], labels: TaskLabels, answer: str | None,
                 abstained: bool) -> None:
    hop = labels.chain[0]
    path = blog_post_path(str(hop["subject"]), str(hop["relation"]))

    def contradicting(url: str) -> bool:
        parts = urlsplit(url)
        return (parts.hostname or "").endswith("." + BLOG_HOST) and parts.path == path

    seen = {u for c in calls for u in (*c.shown, *c.read)}
    record.saw_reliable = any(u in seen for u in labels.evidence_urls)
    record.saw_contradicting = any(contradicting(u) for u in seen)
    if answer is None or abstained:
        return
    blog_text = "\n".join(t for c in calls for u, t in c.text_by_url.items() if contradicting(u))
    if cover_em(answer, list(labels.golds)):
        record.believed = "reliable"
    elif _covers(blog_text, answer):
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
    conflict = [r for r in rows if r.get("saw_reliable") is not None]
    believed = [r for r in conflict if r.get("believed") is not None]
    empty = [r for r in rows if r["empty_search"] and r.get("reaction") is not None]
    labelled = [r for r in rows if r["answerable"] is not None]
    abstained = [r for r in labelled if r["abstained"]]
    unanswerable = [r for r in labelled if not r["answerable"]]
    planned = [r for r in rows if r.get("world") and r.get("plan") is not None]
    real_plan = [r for r in rows if not r.get("world") and r.get("plan") not in (None, "no_search")]
    judged = [r for r in checked if r.get("judged_grounded") is not None]
    two = [r for r in rows if r.get("entities_read") is not None]
    both_read = [r for r in two if r["entities_read"] == 2]
    return {
        "episodes": {"rate": None, "n": len(rows)},
        "searched_then_answered": _rate(sum(r["answered"] and r.get("searched", False) for r in rows), len(rows)),
        "grounded": _rate(sum(r["grounded"] for r in checked), len(checked)),
        "unsupported": _rate(sum(not r["grounded"] for r in checked), len(checked)),
        "pages_per_answer": _mean([r["pages_read"] for r in answered]),
        "sites_per_answer": _mean([r["sites_read"] for r in answered]),
        "conflict_saw_both": _rate(sum(r["saw_reliable"] and r["saw_contradicting"] for r in conflict), len(conflict)),
        "conflict_believed_reliable": _rate(sum(r["believed"] == "reliable" for r in believed), len(believed)),
        "conflict_believed_contradicting": _rate(sum(r["believed"] == "contradicting" for r in believed), len(believed)),
        "reflected": _rate(sum(r["reaction"] == "new_query" for r in empty), len(empty)),
        "repeated_query": _rate(sum(r["reaction"] == "same_query" for r in empty), len(empty)),
        "answered_after_empty": _rate(sum(r["reaction"] == "answered" for r in empty), len(empty)),
        "repeated_calls": _mean([r["repeated_calls"] for r in rows]),
        "abstention_precision": _rate(sum(not r["answerable"] for r in abstained), len(abstained)),
        "abstention_recall": _rate(sum(r["abstained"] for r in unanswerable), len(unanswerable)),
        "plan_in_order": _rate(sum(r["plan"] == "in_order" for r in planned), len(planned)),
        "both_entities_searched": _rate(sum(r["entities_searched"] == 2 for r in two), len(two)),
        "both_pages_read": _rate(sum(r["entities_read"] == 2 for r in two), len(two)),
        "right_when_both_read": _rate(sum(r["correct"] for r in both_read), len(both_read)),
        "first_value_stated": _rate(sum(r["values_stated"][0] for r in both_read), len(both_read)),
        "second_value_stated": _rate(sum(r["values_stated"][1] for r in both_read), len(both_read)),
        "plan_chained": _rate(sum(r["plan"] == "chained" for r in real_plan), len(real_plan)),
        "judge_agreement": _rate(sum(r["judged_grounded"] == r["grounded"] for r in judged), len(judged)),
    }


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
    ("grounded", "grounded", True), ("unsupported", "unsupported", True),
    ("pages_per_answer", "pages/answer", False), ("sites_per_answer", "sites/answer", False),
    ("conflict_saw_both", "conflict: saw both", True), ("conflict_believed_reliable", "conflict: believed reliable", True),
    ("reflected", "reflected", True), ("repeated_query", "same query again", True),
    ("repeated_calls", "repeated calls", False),
    ("abstention_precision", "abstain P", True), ("abstention_recall", "abstain R", True),
    ("plan_in_order", "plan in order", True), ("plan_chained", "chained queries", True),
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
