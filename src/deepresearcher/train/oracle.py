"""A scripted oracle researcher for the synthetic world: it proves the world is solvable by search.

It knows *which* hops a task needs (the task's chain: subject and relation per hop), never their
values: every value it uses is read back from what the real tools return. For each hop it searches
the natural query, browses the best hit, and reads the value off the page the way a person reads an
infobox or a list: by the labels the world's pages were rendered with (``world.pages.INFOBOX_LABELS``
and the list tables beside it), never by a copy of them. Its turns are written in the policy's format,
so they double as SFT data for training.

With ``use_browse=False`` it answers from search snippets alone, which shows how much browsing adds.
With ``terse=True`` its thoughts are a few words each: shorter SFT episodes for a from-scratch model,
which learns the protocol from the data rather than from the prose.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

import orjson

from deepresearcher.agent.tools import ToolBox, ToolContext
from deepresearcher.world import UNANSWERABLE_ANSWER, Task, pages
from deepresearcher.world.knowledge import RELATIONS
from deepresearcher.world.tasks import comparison_winner

# What a value of each kind looks like in page text; a name or a word is whatever fills its cell.
_VALUE = {"year": r"\d{4}", "number": r"\d[\d,]*"}
_CELL = r"[^|\n]*?[^|\s]"


def _value(relation: str) -> str:
    return f"({_VALUE.get(RELATIONS[relation].value_kind, _CELL)})"


def _fill(template: str, relation: str, subject: str) -> str:
    """A page's text ``template`` (``{s}`` the subject, ``{v}`` the value) as a regex capturing the value."""
    parts = re.split(r"(\{[sv]\})", template)
    return "".join(re.escape(subject) if p == "{s}" else _value(relation) if p == "{v}" else re.escape(p) for p in parts)


def _row(*cells: str) -> str:
    """A table row as the tools' text writes it (``| a | b |``, ``web.html``), its cells given as regexes."""
    return r"\|\s*" + r"\s*\|\s*".join(cells) + r"\s*\|"


def _statements(relation: str, subject: str) -> list[str]:
    """Regexes for the ways the world's pages state ``relation`` of ``subject``, from the world's label tables.

    In reading order: an infobox row under the relation's label, the subject's row in a list table,
    the subject's entry in a list.
    """
    found = [_row(re.escape(pages.INFOBOX_LABELS[relation]), _value(relation))]
    if relation in pages.LIST_COLUMNS:
        found.append(_row(re.escape(subject), _value(relation)))
    if relation in pages.LIST_ENTRIES:
        found.append(_fill(pages.LIST_ENTRIES[relation], relation, subject))
    return found


def extract_value(relation: str, subject: str, text: str, title: str = "") -> str | None:
    """The value of ``relation`` for ``subject`` stated in ``text`` (a page's notes or a snippet), if any.

    A list page whose ``title`` names the value its entries share (``pages.LIST_TITLES``) states it
    for every subject it lists.
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


@dataclass
class OracleTurn:
    """One assistant turn in the policy's format, and the observation the tools answered."""

    assistant: str
    observation: str | None = None


@dataclass
class OracleEpisode:
    task_id: str
    answer: str
    turns: list[OracleTurn] = field(default_factory=list)


def _call(name: str, arguments: dict) -> str:
    return "<tool_call>" + orjson.dumps({"name": name, "arguments": arguments}).decode() + "</tool_call>"


TwoEntityOrder = Literal["interleaved", "searches_first", "noted"]
"""How the oracle researches a comparison or two_page task (``train.sft.two_entity_order``)."""


class OracleResearcher:
    """Answers world tasks through a ToolBox, one hop at a time."""

    def __init__(self, toolbox: ToolBox, use_browse: bool = True, pages_per_hop: int = 1, terse: bool = False,
                 two_entity_order: TwoEntityOrder = "interleaved") -> None:
        self.toolbox, self.use_browse, self.pages_per_hop, self.terse = toolbox, use_browse, pages_per_hop, terse
        self.two_entity_order = two_entity_order

    async def run(self, task: Task) -> OracleEpisode:
        episode = OracleEpisode(task.id, "")
        context = ToolContext(task.question)
        if task.type in ("comparison", "two_page") and self.two_entity_order == "interleaved":
            answer = self._combine(task, [await self._lookup(hop.subject, hop.relation, context, episode)
                                          for hop in task.chain])
            values = []
        elif task.type in ("comparison", "two_page"):
            values = await self._lookup_both(task, context, episode)
            answer = self._combine(task, values)
        else:
            subject, answer = task.chain[0].subject, None
            pages = 3 if task.type == "conflict" else self.pages_per_hop
            for hop in task.chain:
                answer = await self._lookup(subject, hop.relation, context, episode, pages)
                if answer is None:
                    break
                subject = answer
            values = []
        episode.answer = answer or UNANSWERABLE_ANSWER
        episode.turns.append(OracleTurn(f"<think>{self._reason(task, values, answer)}</think>\n"
                                        f"<answer>{episode.answer}</answer>"))
        return episode

    async def _lookup_both(self, task: Task, context: ToolContext, episode: OracleEpisode) -> list[str | None]:
        """The values of a two-entity task: both searches first, then both pages (``searches_first``), the
        first page's value noted in the thought before the second page is read (``noted``).

        The quickstart's small model copies well from the observation just above and badly from further back
        (docs/train.md "Two-entity tasks"): searching for the second entity right after the question keeps its
        name close to the question it is copied from, and the note lets the last thought copy each value from
        one turn back.
        """
        found = [await self._search(hop.subject, hop.relation, context, episode) for hop in task.chain]
        values: list[str | None] = []
        for hop, hits in zip(task.chain, found, strict=True):
            note = stated([hop.subject for hop in task.chain], values) if self.two_entity_order == "noted" else ""
            values.append(await self._read(hop.subject, hop.relation, hits, context, episode, note=note))
        return values

    @staticmethod
    def _combine(task: Task, values: list[str | None]) -> str | None:
        if any(v is None for v in values):
            return None
        if task.type == "two_page":
            return "yes" if values[0] == values[1] else "no"
        return task.chain[comparison_winner(task.question, [int(v) for v in values])].subject  # type: ignore[arg-type]

    def _reason(self, task: Task, values: list[str | None], answer: str | None) -> str:
        """The last thought: a two-entity answer restates both values first, so the comparison is made between
        values written side by side rather than recalled from two pages."""
        if answer is None:
            return "I could not find this information in any source."
        if values:
            return values_thought([hop.subject for hop in task.chain], values, answer, self.terse)
        return f"The sources give {answer}."


    async def _lookup(self, subject: str, relation: str, context: ToolContext, episode: OracleEpisode,
                      pages: int = 1) -> str | None:
        hits = await self._search(subject, relation, context, episode)
        return await self._read(subject, relation, hits, context, episode, pages)

    async def _search(self, subject: str, relation: str, context: ToolContext,
                      episode: OracleEpisode) -> list[dict]:
        """Search the relation's natural query; the hits it returned."""
        query = RELATIONS[relation].query.format(s=subject)
        noun = RELATIONS[relation].noun.format(s=subject)
        search_think = f"I need {noun}." if self.terse else f"I need {noun}. Let me search for it."
        search_text = f"<think>{search_think}</think>\n" + _call("web_search", {"query": [query]})
        outcome = await self.toolbox.call("web_search", {"query": [query]}, context)
        episode.turns.append(OracleTurn(search_text, outcome.text))
        return [h for result in (outcome.raw or []) for h in result.get("web_page_info_list", [])]

    async def _read(self, subject: str, relation: str, hits: list[dict], context: ToolContext,
                    episode: OracleEpisode, pages: int = 1, note: str = "") -> str | None:
        """The value of ``relation`` read from the snippets (without browsing) or from the best ``pages`` hits;
        ``note``, what was read before, opens the browsing thought."""
        if not self.use_browse:
            found = [extract_value(relation, subject, h["quick_summary"], h["title"]) for h in hits]
            return next((v for v in found if v), None)
        # A researcher opens the pages about the subject first: its own article, then others naming it.
        ranked = sorted(hits, key=lambda h: (h["title"] != subject, subject not in h["quick_summary"]))
        urls = [h["url"] for h in ranked[:pages]]
        if not urls:
            return None
        noun = RELATIONS[relation].noun.format(s=subject)
        browse_think = "Reading it." if self.terse else f"These pages should state {noun}."
        if note:
            browse_think = f"{note}. {browse_think}"
        browse_text = f"<think>{browse_think}</think>\n" + _call("browse_webpage", {"url_list": urls})
        outcome = await self.toolbox.call("browse_webpage", {"url_list": urls}, context)
        episode.turns.append(OracleTurn(browse_text, outcome.text))
        titles = {h["url"]: h["title"] for h in hits}
        votes = Counter(v for page in (outcome.raw or []) if "information" in page
                        if (v := extract_value(relation, subject, page["information"], titles.get(page["url"], ""))))
        return votes.most_common(1)[0][0] if votes else None


def stated(subjects: list[str], values: list[str | None]) -> str:
    """The values read so far, each after its entity (``A 1834, B 1856``)."""
    return ", ".join(f"{subject} {pages.number_text(v)}" for subject, v in zip(subjects, values) if v is not None)


def values_thought(subjects: list[str], values: list[str | None], answer: str, terse: bool) -> str:
    """The oracle's last thought on a two-entity task whose values it stated (``two_entity_order`` other than
    ``interleaved``): both values side by side, then (unless ``terse``) the answer they give."""
    both = stated(subjects, values)
    return f"{both}." if terse else f"The sources give {both}, so the answer is {answer}."
