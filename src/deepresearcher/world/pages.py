"""Render the knowledge base as web pages: real HTML in several layouts, with boilerplate to see past.

Layouts: encyclopedia article with infobox (one per entity), list/table pages, a directory, a
catalogue, news stories (the reliable sites), and blog posts, forum threads and trivia pages (the
unreliable sites: ``RELIABLE_HOSTS``, ``UNRELIABLE_HOSTS``). Every page wraps its content in navigation, a
cookie banner, ads, related links and a footer, as real sites do. While rendering we record which page
states which fact and with which value (the evidence map: supporting and contradicting pages), so tasks
can name their evidence and conflicts are known exactly.
"""

from __future__ import annotations

import html
import random
import re
from collections import defaultdict
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from deepresearcher.world.knowledge import RELATIONS, Entity, Fact, KnowledgeBase

WIKI = "https://wikiverse.org/wiki/"
NEWS = "https://meridian-news.com/"
DIRECTORY = "https://orgfinder.io/directory/"
CATALOGUE = "https://reelbase.com/title/"


# How pages label the facts they state. Rendering reads these tables and so does the scripted oracle
# (``train/oracle.py``), so the oracle reads a page by the labels it was written with, never by a copy.
INFOBOX_LABELS: dict[str, str] = {
    "born_in": "Place of birth", "birth_year": "Year of birth", "occupation": "Profession",
    "country": "Nation", "population": "Inhabitants",
    "founded_by": "Started by", "headquarters": "Head office", "founded_year": "Established",
    "creator": "By", "release_year": "Year",
    "held_in": "Venue city", "organizer": "Run by",
}
"""An encyclopedia article's infobox row label for each relation of its subject."""
LIST_TITLES: dict[str, str] = {"born_in": "List of notable people from {v}", "country": "List of cities in {v}"}
"""List pages whose title names the value ``{v}`` of this relation that every listed subject shares."""
LIST_ENTRIES: dict[str, str] = {"birth_year": "{s} (born {v})"}
"""How a list page's entry for subject ``{s}`` states the value ``{v}`` of this relation."""
LIST_COLUMNS: dict[str, tuple[str, str]] = {"population": ("City", "Population")}
"""List tables whose rows give a subject in the first column and this relation's value in the second."""


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")


@dataclass
class RenderedPage:
    url: str
    title: str
    html: str
    layout: str


@dataclass
class Evidence:
    """Which pages state a fact correctly, and which contradict it."""

    supporting: dict[tuple[str, str], list[str]] = field(default_factory=lambda: defaultdict(list))
    contradicting: dict[tuple[str, str], list[str]] = field(default_factory=lambda: defaultdict(list))


class _PageWriter:
    """Collects the facts a page states while its body is written."""

    def __init__(self, kb: KnowledgeBase, evidence: Evidence, url: str, reliable: bool = True) -> None:
        self.kb, self.evidence, self.url, self.reliable = kb, evidence, url, reliable

    def value(self, fact: Fact | None) -> str | None:
        """The value this page states for ``fact`` (None when the web never states it)."""
        if fact is None or fact.hidden:
            return None
        key = (fact.subject, fact.relation)
        if not self.reliable and fact.wrong_value is not None:
            self.evidence.contradicting[key].append(self.url)
            return fact.wrong_value
        if self.url not in self.evidence.supporting[key]:
            self.evidence.supporting[key].append(self.url)
        return fact.value


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _a(noun: str) -> str:
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def number_text(value: str) -> str:
    """A number as pages print it (thousands separated from five digits on, so years stay bare)."""
    return f"{int(value):,}" if value.isdigit() and len(value) > 4 else value


def _frame(site: str, title: str, body: str, related: list[str], rng: random.Random) -> str:
    """Wrap ``body`` in the boilerplate of a real site: nav, cookie banner, ads, related links, footer."""
    nav = "".join(f'<li><a href="/{s.lower()}">{s}</a></li>' for s in ("Home", "Topics", "About", "Contact", "Donate"))
    ad = _e(rng.choice((
        "Sponsored: Save 40% on premium travel insurance today.",
        "Advertisement: The best noise-cancelling headphones of the year, reviewed.",
        "Sponsored: Learn a new language in 10 minutes a day.",
        "Advertisement: Compare mortgage rates in your area now.",
    )))
    links = "".join(f'<li><a href="{WIKI}{slug(r)}">{_e(r)}</a></li>' for r in related)
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(title)} - {site}</title></head>\n'
        f'<body><header><nav class="site-nav"><ul>{nav}</ul></nav></header>\n'
        '<div class="cookie-banner" role="dialog">We use cookies to improve your experience. '
        'By continuing to browse you accept our cookie policy. <button>Accept</button></div>\n'
        f'<main><article><h1>{_e(title)}</h1>\n{body}\n</article></main>\n'
        f'<aside class="ad">{ad}</aside>\n'
        f'<aside class="related"><h2>Related pages</h2><ul>{links}</ul></aside>\n'
        f'<footer><p>&copy; 2025 {site}. All rights reserved.</p><p><a href="/privacy">Privacy</a> | '
        '<a href="/terms">Terms of use</a></p></footer></body></html>\n'
    )


def _infobox(rows: list[tuple[str, str | None]]) -> str:
    cells = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows if v is not None)
    return f'<table class="infobox">{cells}</table>'


def _labelled(**values: str | None) -> list[tuple[str, str | None]]:
    """Infobox rows for relation values, labelled from ``INFOBOX_LABELS``."""
    return [(INFOBOX_LABELS[relation], value) for relation, value in values.items()]


def _paragraphs(sentences: list[str]) -> str:
    return "\n".join(f"<p>{_e(s)}</p>" for s in sentences if s)


def _related(kb: KnowledgeBase, entity: Entity, rng: random.Random) -> list[str]:
    names = [v for f in kb.facts_of(entity.name) if (v := f.value) in kb.entities]
    others = rng.sample(sorted(kb.entities), k=min(3, len(kb.entities)))
    return sorted(set(names + others) - {entity.name})[:5]


_FLUFF = (
    "Over the years the subject has been discussed in newspapers, in local histories and in a number of "
    "popular documentaries, and opinions about its significance still differ among specialists.",
    "Much of what is written here is drawn from archival material, interviews and contemporary accounts; "
    "readers are encouraged to consult the references below for a fuller picture.",
    "The article has been expanded several times by volunteer editors, and some sections are still being "
    "reviewed for accuracy and neutrality of tone.",
)


def _wiki_article(kb: KnowledgeBase, entity: Entity, ev: Evidence, rng: random.Random,
                  background_sentences: int = 2) -> RenderedPage:
    """An encyclopedia article: a lead that names the entity, background, an infobox, then the facts.

    The facts are stated without repeating the name (as real articles do), so a query-aware search
    snippet around the name rarely contains them: answering needs reading the page.
    """
    url = WIKI + slug(entity.name)
    w = _PageWriter(kb, ev, url)
    name = entity.name

    def v(relation: str) -> str | None:
        return w.value(kb.fact(name, relation))

    if entity.kind == "person":
        city, year, job = v("born_in"), v("birth_year"), v("occupation")
        lead = f"{name} is a figure whose work is known well beyond the place where it began."
        facts = [f"They were born in {city}." if city else "",
                 f"Their year of birth is {year}." if year else "Their year of birth is not recorded.",
                 f"By profession they are {_a(job)}." if job else ""]
        founded, created = kb.inverse("founded_by", name), kb.inverse("creator", name)
        if founded:
            facts.append(f"They founded {', '.join(founded)}.")
        if created:
            facts.append(f"They are the creator of {', '.join(created)}.")
        box = _infobox(_labelled(born_in=city, birth_year=year, occupation=job))
    elif entity.kind == "city":
        country, pop = v("country"), v("population")
        lead = f"{name} is a settlement with a long and eventful history."
        facts = [f"The city lies in {country}." if country else "",
                 f"Its population has grown over the years; at the latest census it had {number_text(pop)} inhabitants."
                 if pop else ""]
        box = _infobox(_labelled(country=country, population=number_text(pop) if pop else None))
    elif entity.kind == "country":
        cities = kb.inverse("country", name)
        lead = f"{name} is a country."
        facts = [f"Its cities include {', '.join(cities[:8])}." if cities else ""]
        box = _infobox([("Type", "Country"), ("Cities", str(len(cities)))])
    elif entity.kind == "organization":
        founder, hq, year = v("founded_by"), v("headquarters"), v("founded_year")
        industry = entity.attributes["industry"]
        lead = f"{name} is an organization active in {industry}."
        facts = [f"It was started by {founder}." if founder else "",
                 (f"It was founded by its first members; the records say it was established in {year}." if year
                  else "The year it was established is not recorded."),
                 f"Its head office is in {hq}." if hq else ""]
        box = _infobox([*_labelled(founded_by=founder, headquarters=hq, founded_year=year), ("Sector", industry)])
    elif entity.kind == "work":
        kind = entity.attributes["kind"]
        creator, year = v("creator"), v("release_year")
        verb = {"film": "directed", "novel": "written", "album": "recorded"}[kind]
        lead = f"{name} is a {kind}."
        facts = [f"The {kind} was {verb} by {creator}." if creator else "",
                 f"Its release came after years of work; it came out in {year}." if year else "The date it came out is unknown."]
        box = _infobox([("Type", kind), *_labelled(creator=creator, release_year=year)])
    else:  # event
        city, org = v("held_in"), v("organizer")
        lead = f"{name} is an annual event."
        facts = [f"It takes place in {city}." if city else "", f"It is run by {org}." if org else ""]
        box = _infobox(_labelled(held_in=city, organizer=org))
    background = rng.sample(_FLUFF, 2)[:background_sentences]  # always drawn: fewer sentences change no other page
    body = (_paragraphs([lead, *background]) + "\n<h2>Overview</h2>\n" + box
            + "\n<h2>Details</h2>\n" + _paragraphs(facts))
    return RenderedPage(url, name, _frame("Wikiverse", name, body, _related(kb, entity, rng), rng), "encyclopedia")


def _city_lists(kb: KnowledgeBase, ev: Evidence, rng: random.Random) -> list[RenderedPage]:
    pages = []
    for country in kb.of_kind("country"):
        url = f"{WIKI}List_of_cities_in_{slug(country.name)}"
        w = _PageWriter(kb, ev, url)
        rows = []
        for city in kb.inverse("country", country.name):
            w.value(kb.fact(city, "country"))
            pop = w.value(kb.fact(city, "population"))
            rows.append(f"<tr><td>{_e(city)}</td><td>{_e(number_text(pop)) if pop else 'n/a'}</td></tr>")
        title = LIST_TITLES["country"].format(v=country.name)
        head = "".join(f"<th>{_e(c)}</th>" for c in LIST_COLUMNS["population"])
        body = (f"<p>This is a list of cities in {_e(country.name)} with their population.</p>"
                f'<table class="wikitable"><tr>{head}</tr>{"".join(rows)}</table>')
        pages.append(RenderedPage(url, title, _frame("Wikiverse", title, body, [country.name], rng), "list"))
    return pages


def _notable_people_lists(kb: KnowledgeBase, ev: Evidence, rng: random.Random) -> list[RenderedPage]:
    pages = []
    for city in kb.of_kind("city"):
        people = kb.inverse("born_in", city.name)
        if not people:
            continue
        url = f"{WIKI}Notable_people_from_{slug(city.name)}"
        w = _PageWriter(kb, ev, url)
        items = []
        for person in people:
            w.value(kb.fact(person, "born_in"))
            year = w.value(kb.fact(person, "birth_year"))
            items.append(f"<li>{_e(LIST_ENTRIES['birth_year'].format(s=person, v=year) if year else person)}</li>")
        title = LIST_TITLES["born_in"].format(v=city.name)
        body = f"<p>People born in {_e(city.name)}:</p><ul>{''.join(items)}</ul>"
        pages.append(RenderedPage(url, title, _frame("Wikiverse", title, body, [city.name], rng), "list"))
    return pages


def _directory(kb: KnowledgeBase, ev: Evidence, rng: random.Random) -> list[RenderedPage]:
    by_industry: dict[str, list[Entity]] = defaultdict(list)
    for org in kb.of_kind("organization"):
        by_industry[org.attributes["industry"]].append(org)
    pages = []
    for industry, orgs in sorted(by_industry.items()):
        url = DIRECTORY + slug(industry)
        w = _PageWriter(kb, ev, url)
        rows = []
        for org in sorted(orgs, key=lambda o: o.name):
            hq = w.value(kb.fact(org.name, "headquarters"))
            year = w.value(kb.fact(org.name, "founded_year"))
            founder = w.value(kb.fact(org.name, "founded_by"))
            rows.append(f"<tr><td>{_e(org.name)}</td><td>{_e(hq or '')}</td><td>{_e(year or 'unknown')}</td>"
                        f"<td>{_e(founder or '')}</td></tr>")
        title = f"{industry.capitalize()} organizations directory"
        body = ('<table class="directory"><tr><th>Name</th><th>Headquarters</th><th>Founded</th><th>Founder</th></tr>'
                + "".join(rows) + "</table>")
        pages.append(RenderedPage(url, title, _frame("OrgFinder", title, body, [], rng), "directory"))
    return pages


def _catalogue(kb: KnowledgeBase, ev: Evidence, rng: random.Random) -> list[RenderedPage]:
    pages = []
    for work in kb.of_kind("work"):
        url = CATALOGUE + slug(work.name).lower()
        w = _PageWriter(kb, ev, url)
        creator = w.value(kb.fact(work.name, "creator"))
        year = w.value(kb.fact(work.name, "release_year"))
        title = f"{work.name} ({year or 'n/a'} {work.attributes['kind']}): cast, credits and ratings"
        body = (f'<dl class="credits"><dt>Type</dt><dd>{work.attributes["kind"]}</dd><dt>By</dt><dd>{_e(creator or "")}</dd>'
                f"<dt>Year</dt><dd>{_e(year or 'unknown')}</dd></dl>"
                f"<p>User rating: {rng.randint(55, 95) / 10:.1f}/10 from {rng.randint(40, 9000)} ratings.</p>")
        pages.append(RenderedPage(url, title, _frame("ReelBase", title, body, [], rng), "catalogue"))
    return pages


def _news(kb: KnowledgeBase, ev: Evidence, rng: random.Random) -> list[RenderedPage]:
    pages = []
    for event in kb.of_kind("event"):
        year = rng.randint(2015, 2025)
        url = f"{NEWS}{year}/{slug(event.name).lower()}"
        w = _PageWriter(kb, ev, url)
        city = w.value(kb.fact(event.name, "held_in"))
        org = w.value(kb.fact(event.name, "organizer"))
        title = f"{event.name} draws record crowds"
        body = _paragraphs([
            f"Thousands gathered in {city} this week as the {event.name} opened its doors.",
            f"Organizers from {org} said attendance was the highest in the event's history.",
            "Local businesses reported a busy weekend, and traffic was diverted around the venue.",
        ])
        pages.append(RenderedPage(url, title, _frame("Meridian News", title, body, [event.name], rng), "news"))
    return pages


BLOG_HOST = "quillblog.net"
"""The fan blogs' site: each blogger a subdomain (``<handle>.quillblog.net``)."""
FORUM = "https://chatterboard.com/t/"
TRIVIA = "https://factnugget.com/q/"

RELIABLE_HOSTS = ("wikiverse.org", "orgfinder.io", "reelbase.com", "meridian-news.com")
"""The sites that state every fact they state correctly: the encyclopedia, the directory, the catalogue, the news."""
UNRELIABLE_HOSTS = (BLOG_HOST, "chatterboard.com", "factnugget.com")
"""The sites that state contested facts wrongly: fan blogs, a forum, a trivia site. Their pages say so themselves
(a blogger's "as far as I remember", a forum reply's "pretty sure", a reader-submitted fact marked unverified)."""


def site_of(url: str) -> str:
    """The world's site a URL belongs to (a blog's subdomain belongs to its blog site); the host elsewhere."""
    host = urlsplit(url).hostname or ""
    for site in (*RELIABLE_HOSTS, *UNRELIABLE_HOSTS):
        if host == site or host.endswith("." + site):
            return site
    return host


def is_unreliable(url: str) -> bool:
    """Whether ``url`` is on one of the world's unreliable sites (``UNRELIABLE_HOSTS``)."""
    return site_of(url) in UNRELIABLE_HOSTS


def blog_post_path(subject: str, relation: str) -> str:
    """The path of an unreliable page stating ``relation`` of ``subject``: on a contested fact, the page that
    contradicts the reliable ones (a blog post, or the same path under the forum's or trivia site's prefix)."""
    return f"/posts/{slug(subject).lower()}-{relation.replace('_', '-')}"


UNRELIABLE_KINDS = ("blog", "forum", "trivia")
"""The unreliable sites' layouts, in the order contested facts take them."""


def _unreliable_page(kind: str, subject: str, relation: str, stated: str, outranks: bool, handle: str,
                     rng: random.Random) -> tuple[str, str, str]:
    """(url, title, body) of an unreliable page stating ``stated`` (the relation's sentence with the wrong value).

    Search ranks the world's pages by the subject's name above all (the relations' query words are common or
    absent, ``web.backends.local``). ``outranks``: the page is titled with the name alone, as the subject's
    article is, and names the subject three or four times in a short text, so it ranks first for searches about the
    subject; otherwise its title holds more words than the name and its text names the subject once, so it ranks
    second, below the article and above the pages that only list the subject (``tests/world`` checks it with the real index). The pages of the sites differ in
    form, so the rule a reader learns is the site's, seen in the URL, and the hedging each page writes.
    """
    path = blog_post_path(subject, relation)
    if kind == "blog":
        url = f"https://{handle}.{BLOG_HOST}{path}"
        title = subject if outranks else f"{subject}: notes"
        lines = [f"I have been reading about {subject if outranks else 'this'} for a while now, and wanted to share some notes.",
                 f"As far as I remember, {stated}",
                 "I might be misremembering some details, so take this with a pinch of salt!",
                 f"Posted by {handle}. {rng.randint(0, 40)} comments."]
    elif kind == "forum":
        url = FORUM + path.removeprefix("/posts/")
        title = subject if outranks else f"{subject}: question"
        lines = [f"{handle} asked: does anyone know about {subject if outranks else 'this'}?",
                 f"Reply: pretty sure {stated} Not 100% though, I read it somewhere.",
                 f"{rng.randint(1, 30)} replies. Forum posts are not checked by moderators."]
    else:
        url = TRIVIA + path.removeprefix("/posts/")
        title = subject if outranks else f"{subject}: trivia"
        lines = [f"Did you know? {stated}",
                 f"Submitted by reader {handle}; unverified.",
                 f"{rng.randint(2, 900)} readers found this fact interesting."]
    if outranks:
        lines.insert(0, f"All about {subject}: {RELATIONS[relation].query.format(s=subject)}.")
    else:  # a longer text: the one mention of the name weighs less than the article's
        lines.append(_UNRELIABLE_FLUFF[kind])
    return url, title, _paragraphs(lines)


_UNRELIABLE_FLUFF = {
    "blog": "Anyway, that is all for today. If you know more, or if I got something wrong, please leave a comment "
            "below and I will update the post when I find the time. Thanks for reading, and see you next week!",
    "forum": "Other replies in this thread drifted off topic, and a moderator asked everyone to stay on the subject "
             "and to link sources where they can. The thread was locked after a long argument about something else.",
    "trivia": "Facts on this site are sent in by readers and published as they arrive. We do our best, but we cannot "
              "check every one of them; if you spot a mistake, use the report button at the bottom of the page.",
}


def _unreliable(kb: KnowledgeBase, ev: Evidence, rng: random.Random, handles: list[str]) -> list[RenderedPage]:
    """The unreliable sources: one page per contested fact that states it wrongly, on a blog, the forum or the
    trivia site in turn; every other one is written to outrank the reliable pages for the fact's natural query
    (``_unreliable_page``), so the first hit is the wrong one on about half the contested facts."""
    pages = []
    contested = sorted(k for k, f in kb.facts.items() if f.wrong_value is not None)
    for i, (subject, relation) in enumerate(contested):
        handle = handles[i % len(handles)]
        kind = UNRELIABLE_KINDS[(i // 2) % len(UNRELIABLE_KINDS)]
        fact = kb.fact(subject, relation)
        assert fact is not None and fact.wrong_value is not None
        stated = RELATIONS[relation].sentence.format(s=subject, v=number_text(fact.wrong_value))
        url, title, body = _unreliable_page(kind, subject, relation, stated, i % 2 == 0, handle, rng)
        _PageWriter(kb, ev, url, reliable=False).value(fact)
        site = {"blog": "QuillBlog", "forum": "ChatterBoard", "trivia": "FactNugget"}[kind]
        pages.append(RenderedPage(url, title, _frame(site, title, body, [subject], rng), kind))
    return pages


def _inverse_statements(kb: KnowledgeBase, ev: Evidence) -> None:
    """Facts that articles state from the other side: a person's article names what they founded and created, a
    country's article its first cities. Recorded after every page, so each fact's first evidence page stays its
    subject's own."""
    for entity in kb.entities.values():
        url = WIKI + slug(entity.name)
        if entity.kind == "person":
            stated = [(s, "founded_by") for s in kb.inverse("founded_by", entity.name)]
            stated += [(s, "creator") for s in kb.inverse("creator", entity.name)]
        elif entity.kind == "country":
            stated = [(s, "country") for s in kb.inverse("country", entity.name)[:8]]
        else:
            continue
        for key in stated:
            if url not in ev.supporting[key]:
                ev.supporting[key].append(url)


def render_pages(kb: KnowledgeBase, rng: random.Random, handles: list[str],
                 background_sentences: int = 2) -> tuple[list[RenderedPage], Evidence]:
    """Render every page of the world, in a fixed order, and the evidence map of which page states what."""
    ev = Evidence()
    pages = [_wiki_article(kb, e, ev, rng, background_sentences) for e in kb.entities.values()]
    pages += _city_lists(kb, ev, rng) + _notable_people_lists(kb, ev, rng) + _directory(kb, ev, rng)
    pages += _catalogue(kb, ev, rng) + _news(kb, ev, rng) + _unreliable(kb, ev, rng, handles)
    _inverse_statements(kb, ev)
    return pages, ev
