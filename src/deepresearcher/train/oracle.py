"""A scripted oracle researcher for the synthetic world: it proves the world is solvable by search.

It knows *which* hops a task needs (the task's chain: subject and relation per hop), never their
values: every value it uses is read back from what the real tools return. For each hop it searches
the natural query, browses the best hit (a reliable site's page about the subject), and reads the value
off the page the way a person reads an infobox or a list: by the forms the world's pages were rendered
with (``world.reading``), never by a copy of them. When the hits include a page of an unreliable site (a
blog, the forum, the trivia site: ``world.pages.UNRELIABLE_HOSTS``, visible in its URL) it reads that page
too (first, so the reliable page is read last) and weighs the two as the world's rule says
(``world.reading.weigh``: the reliable site wins); its last thought names the other site's value, then the site
it trusts and its value. Its turns are written in the policy's format, so
they double as SFT data for training.

With ``use_browse=False`` it answers from search snippets alone, which shows how much browsing adds.
With ``terse=True`` its thoughts are a few words each: shorter SFT episodes for a from-scratch model,
which learns the protocol from the data rather than from the prose.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import orjson

from deepresearcher.agent.tools import ToolBox, ToolContext
from deepresearcher.world import UNANSWERABLE_ANSWER, Task, pages
from deepresearcher.world.knowledge import RELATIONS
from deepresearcher.world.pages import is_unreliable
from deepresearcher.world.reading import extract_value, weigh
from deepresearcher.world.tasks import comparison_winner

__all__ = ["OracleEpisode", "OracleResearcher", "OracleTurn", "extract_value", "stated", "values_thought"]


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
        self._weighed: list[tuple[str, str]] = []  # the last lookup's (url, value) read, when its sources disagreed

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
            for hop in task.chain:
                answer = await self._lookup(subject, hop.relation, context, episode, self.pages_per_hop)
                if answer is None:
                    break
                subject = answer
            values = []
        episode.answer = answer or UNANSWERABLE_ANSWER
        reason = self._reason(task, values, answer)
        if answer is not None and task.type not in ("comparison", "two_page") and self._weighed:  # sources disagreed
            reason = weighed_thought(self._weighed, answer)
        episode.turns.append(OracleTurn(f"<think>{reason}</think>\n<answer>{episode.answer}</answer>"))
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
        """The value of ``relation`` read from the snippets (without browsing) or from the best ``pages`` hits and
        every unreliable hit among the first two (read to be weighed against the reliable page); ``note``, what was
        read before, opens the browsing thought."""
        self._weighed = []
        if not self.use_browse:
            found = [(h["url"], v) for h in hits if (v := extract_value(relation, subject, h["quick_summary"], h["title"]))]
            return weigh(found)
        # A researcher opens the pages about the subject first: a reliable site's, its own article before others.
        ranked = sorted(hits, key=lambda h: (is_unreliable(h["url"]), h["title"] != subject,
                                             subject not in h["quick_summary"]))
        urls = [h["url"] for h in ranked[:pages] if not is_unreliable(h["url"])]
        # An unreliable page among the first two hits is read too, before the reliable one: the value believed
        # is then the one read last, right above the thought that names it (a small model copies from just above).
        urls = [h["url"] for h in hits[:2] if is_unreliable(h["url"]) and h["url"] not in urls] + urls
        if not urls:
            return None
        noun = RELATIONS[relation].noun.format(s=subject)
        browse_think = "Reading it." if self.terse else f"These pages should state {noun}."
        if len(urls) > 1:
            browse_think = "Checking both." if self.terse else f"These pages should state {noun}; checking one against the other."
        if note:
            browse_think = f"{note}. {browse_think}"
        config = getattr(self.toolbox, "config", None)
        per_call = config.browse.max_urls if config is not None else len(urls)
        titles = {h["url"]: h["title"] for h in hits}
        read: list[tuple[str, str]] = []
        for start in range(0, len(urls), per_call):
            batch = urls[start:start + per_call]
            text = f"<think>{browse_think}</think>\n" if start == 0 else ("<think>And the other.</think>\n" if self.terse
                                                                          else "<think>Now the other page.</think>\n")
            outcome = await self.toolbox.call("browse_webpage", {"url_list": batch}, context)
            episode.turns.append(OracleTurn(text + _call("browse_webpage", {"url_list": batch}), outcome.text))
            read += [(page["url"], v) for page in (outcome.raw or []) if "information" in page
                     if (v := extract_value(relation, subject, page["information"], titles.get(page["url"], "")))]
        if len({v for _, v in read}) > 1:
            self._weighed = read
        return weigh(read)


def weighed_thought(read: list[tuple[str, str]], answer: str) -> str:
    """The last thought when the sources disagreed: the other sites' values, then the reliable site trusted and
    its value, last (the answer copies it from just above)."""
    trusted = next(pages.site_of(u) for u, v in read if v == answer)
    others = ", ".join(f"{pages.site_of(u)} {pages.number_text(v)}" for u, v in read if v != answer)
    return f"{others}; {trusted} is reliable: {answer}."


def stated(subjects: list[str], values: list[str | None]) -> str:
    """The values read so far, each after its entity (``A 1834, B 1856``)."""
    return ", ".join(f"{subject} {pages.number_text(v)}" for subject, v in zip(subjects, values) if v is not None)


def values_thought(subjects: list[str], values: list[str | None], answer: str, terse: bool) -> str:
    """The oracle's last thought on a two-entity task whose values it stated (``two_entity_order`` other than
    ``interleaved``): both values side by side, then (unless ``terse``) the answer they give."""
    both = stated(subjects, values)
    return f"{both}." if terse else f"The sources give {both}, so the answer is {answer}."
