"""The trap site: a small real site plus the crawler traps real sites contain, and a legitimate large site.

Two hosts on loopback ports, every request counted per URL as the mock web counts them
(`counts["http://127.0.0.1:PORT" + request target as received]`, robots.txt included):

    async with TrapWeb(TrapSpec()) as web:                    # in the running event loop
        ...  web.seed, web.items_seed, web.counts, web.requests_by_kind()

    with TrapWeb.serve_in_thread(TrapSpec(items=0)) as web:   # own loop in a daemon thread
        ...  web.snapshot()

    python -m frontier.testing.traps [--traps calendar,search] [--items 2000]
        prints one JSON line {"ports", "base_urls", "seed", "items_seed", "stats_url"} and serves until
        SIGTERM/SIGINT or until its parent dies; GET /__stats__ on host 0 answers like the mock web's
        (`frontier.testing.fetch_stats` reads it).

Host 0, the trap site (seed "/"): `normal_pages` distinct articles "/page/N.html" (the index links the first
ten, each page links two more, so all are reachable within a few hops) and the traps of `spec.traps`, each
linked from the navigation bar of every page. Each trap below is infinite or huge; what bounds it is named.

    calendar  "/cal/YYYY/MM": an empty month grid linking the previous and next month and year, from year 1
              to 9999 (4 links a page). Pages differ in a few words: near-duplicates under one pattern.
    session   "/account/{home,settings,help}": three pages linking each other with a new session id on
              every link, ";jsessionid=<hex>" in the path and "?sid=<hex>" in the query. Stripping session
              ids collapses it to 3 URLs; without that, every URL is a copy of one of 3 pages.
    search    "/search?q=WORD&page=N": "no results" pages linking the next page and two new searches.
    soft404   every unknown path answers 200 with a "not found" page echoing the path and linking two more
              unknown paths ("/wiki/Word", "/topics/word/word"); the navigation enters at "/wiki/Main_Page".
              Without this trap unknown paths answer a real 404.
    relative  "/docs/" links href="sub/"; "/docs/sub/sub/.../" all serve the same page.
    mirror    "/mirror/" links "a/", "/mirror/a/" links "b/" and "c.html", and "b" is a symlink to "../..":
              "/mirror/a/b/" is "/mirror/" again, so the subtree contains itself ("/mirror/a/b/a/b/...").
    fanout    "/links.html" links `fanout_links` (200,000) pages "/fan/N", near-duplicates of each other; with
              `fanout_items`, distinct item pages instead, each linking three more of the 200,000 (a huge
              catalogue behind one page: it keeps growing however many are fetched).

With `templated`, the articles have 20 to 40 words of their own in the shared template
(a title, the navigation, a list of links, the footer's filler) and every unknown path answers 200 with a
"not found" page in the same template (the soft404 trap's, when it is on; else one without links of its own).

Host 1, the legitimate large site (only when `items` > 0; seed `items_seed`): "/item/N" for N in 1..items,
each with its own title and description (no two alike), related items and previous/next links, listed
50 to a page on "/items?page=N". A trap defence must fetch all of it: `item_urls()`.

Every page of both hosts shares its host's template (navigation and footer), as real sites do, so
near-duplicate tests see boilerplate. Everything a page shows is a pure function of the spec and the
URL (ids and words are derived by hashing the request), so a refetch gives the same page and the same
links. `requests_by_kind()` sorts the counted requests into "normal", each trap's name, "items",
"robots" and "other".
"""

from __future__ import annotations

import argparse
import asyncio
import calendar
import contextlib
import json
import math
import os
import random
import signal
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from html import escape
from typing import Any
from urllib.parse import unquote

import xxhash
from aiohttp import hdrs, web

from frontier.errors import ConfigError
from frontier.testing.mockweb import BACKLOG, HTML, MAX_LINE_SIZE, SHUTDOWN_TIMEOUT, new_loop, served_in_thread
from frontier.testing.sitegraph import LOOPBACK, ROBOTS_PATH, STATS_PATH

__all__ = ["TRAPS", "ItemSite", "Reply", "TrapSite", "TrapSpec", "TrapWeb", "classify", "prose", "requests_by_kind"]

TRAPS = ("calendar", "session", "search", "soft404", "relative", "mirror", "fanout")
CALENDAR_ENTRY = "/cal/2024/01"
SEARCH_ENTRY = "/search?page=1&q=news"
SOFT404_ENTRY = "/wiki/Main_Page"
ITEMS_PER_LISTING = 50
SESSION_PAGES = ("home", "settings", "help")
_TEXT = "text/plain; charset=utf-8"

# Pseudo-words for distinct text, mixed with English function words at the rate of real prose.
_SYLLABLES = ("ka", "to", "ri", "ne", "mu", "sa", "lo", "pe", "di", "va", "zu", "gor", "len", "bri", "tas",
              "mon", "el", "ar", "quin", "sel", "dra", "vo", "ti", "om", "ush", "ber", "ca", "fen", "ix", "ul")
_FUNCTION_WORDS = ("the", "of", "and", "a", "to", "in", "is", "for", "on", "with", "as", "by", "at", "from",
                   "that", "this", "it", "was", "are", "be")


def _vocabulary(size: int = 4000) -> tuple[str, ...]:
    rng = random.Random(20240613)
    words: dict[str, None] = {}
    while len(words) < size:
        words["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))] = None
    return tuple(words)


VOCAB = _vocabulary()


def _rng(*parts: object) -> random.Random:
    """A generator seeded by the parts, the same in every process (xxhash, never hash())."""
    return random.Random(xxhash.xxh3_64_intdigest("\x00".join(map(str, parts)).encode()))


def _token(*parts: object) -> str:
    """A 32-hex-digit id derived from the parts: a session id that is new on every link."""
    return xxhash.xxh3_128_hexdigest("\x00".join(map(str, parts)).encode())


def prose(rng: random.Random, words: int) -> str:
    """`words` words of pseudo-prose in sentences: distinct content words, common function words."""
    out: list[str] = []
    sentence: list[str] = []
    length = rng.randint(6, 14)
    for _ in range(words):
        word = rng.choice(_FUNCTION_WORDS) if rng.random() < 0.4 else rng.choice(VOCAB)
        sentence.append(word)
        if len(sentence) == length:
            out.append(" ".join(sentence).capitalize() + ".")
            sentence, length = [], rng.randint(6, 14)
    if sentence:
        out.append(" ".join(sentence).capitalize() + ".")
    return " ".join(out)


def _page(site: str, nav: str, title: str, body: str, footer: str) -> bytes:
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{escape(title)} | {site}</title></head>\n'
        f"<body><header><p>{site}</p><nav>{nav}</nav></header>\n"
        f"<main><h1>{escape(title)}</h1>\n{body}\n</main>\n"
        f"<footer><p>{footer}</p></footer></body></html>\n"
    ).encode()


def _number(text: str) -> int | None:
    """The value of a short ASCII digit string, else None."""
    return int(text) if text.isascii() and text.isdigit() and len(text) < 10 else None


def _a(href: str, text: str) -> str:
    return f'<a href="{escape(href)}">{escape(text)}</a>'


@dataclass(frozen=True, kw_only=True)
class TrapSpec:
    """The shape of the trap site and the large site; see the module docstring."""

    normal_pages: int = 50
    traps: tuple[str, ...] = TRAPS
    fanout_links: int = 200_000
    items: int = 2_000
    seed: int = 1
    crawl_delay: float | None = None  # a robots.txt Crawl-delay line on both hosts when set
    templated: bool = False  # short articles in one template, unknown paths 200 (module docstring)
    fanout_items: bool = False  # the fan-out's pages are distinct items linking more of them (module docstring)

    def __post_init__(self) -> None:
        for key, low, high in (("normal_pages", 1, 100_000), ("fanout_links", 1, 10_000_000),
                               ("items", 0, 10_000_000), ("seed", -(2**63), 2**63)):
            value = getattr(self, key)
            if type(value) is not int or not low <= value <= high:
                raise ConfigError(f"must be an int in [{low}, {high}], got {value!r}", key)
        for key in ("templated", "fanout_items"):
            if type(getattr(self, key)) is not bool:
                raise ConfigError(f"must be a bool, got {getattr(self, key)!r}", key)
        traps = self.traps
        if isinstance(traps, str) or not all(t in TRAPS for t in traps):
            raise ConfigError(f"must be a sequence of names from {', '.join(TRAPS)}, got {traps!r}", "traps")
        object.__setattr__(self, "traps", tuple(t for t in TRAPS if t in traps))
        delay = self.crawl_delay
        if delay is not None and (isinstance(delay, bool) or not isinstance(delay, (int, float))
                                  or not 0 <= delay < math.inf):
            raise ConfigError(f"must be None or a finite number >= 0, got {delay!r}", "crawl_delay")


@dataclass(frozen=True, slots=True)
class Reply:
    """What the server answers to one request."""

    status: int
    body: bytes
    content_type: str = HTML


def classify(path: str, *, host: int = 0) -> str:
    """Which part of the site a request path (decoded, query excluded) belongs to: "robots", "normal",
    "items", a trap's name, or "other" (an unknown path: the soft404 trap when it is on)."""
    if path == ROBOTS_PATH:
        return "robots"
    if host == 1:
        return "items"
    path = path.split(";", 1)[0]
    if path == "/" or (path.startswith("/page/") and path.endswith(".html")):
        return "normal"
    for prefix, name in (("/cal/", "calendar"), ("/account/", "session"), ("/docs/", "relative"),
                         ("/fan/", "fanout")):
        if path.startswith(prefix):
            return name
    if path == "/search":
        return "search"
    if path == "/links.html":
        return "fanout"
    if path == "/mirror/" or (path.startswith("/mirror/") and _mirror_target(path) is not None):
        return "mirror"
    return "other"


def _mirror_target(path: str) -> str | None:
    """The real page a /mirror/ path shows ("", "a/" or "a/c.html"), "a/b/" being a link to "../..";
    None when the path names nothing there."""
    rest = path[len("/mirror/"):]
    while rest.startswith("a/b/"):
        rest = rest[4:]
    return rest if rest in ("", "a/", "a/c.html") else None


class TrapSite:
    """The pages of host 0 as a pure function: `respond(path, query)`."""

    NAME = "Trapdoor Gazette"

    def __init__(self, spec: TrapSpec) -> None:
        self.spec = spec
        self._on = frozenset(spec.traps)
        self._fanout: bytes | None = None
        footer_rng = _rng("trap-footer", spec.seed)
        self._footer = escape(prose(footer_rng, 60))

    def normal_paths(self) -> list[str]:
        """The paths a crawler must fetch: the index and every article."""
        return ["/"] + [f"/page/{n}.html" for n in range(1, self.spec.normal_pages + 1)]

    def _nav(self, here: str) -> str:
        links = [_a("/", "Home"), _a("/page/1.html", "Latest")]
        on = self._on
        if "calendar" in on:
            links.append(_a(CALENDAR_ENTRY, "Events"))
        if "search" in on:
            links.append(_a(SEARCH_ENTRY, "Search"))
        if "session" in on:
            links.append(_a(f"/account/home;jsessionid={_token('nav', self.spec.seed, here)}", "My account"))
        if "soft404" in on:
            links.append(_a(SOFT404_ENTRY, "Wiki"))
        if "relative" in on:
            links.append(_a("/docs/", "Documentation"))
        if "mirror" in on:
            links.append(_a("/mirror/", "Mirror"))
        if "fanout" in on:
            links.append(_a("/links.html", "All links"))
        return " | ".join(links)

    def _html(self, here: str, title: str, body: str) -> Reply:
        return Reply(200, _page(self.NAME, self._nav(here), title, body, self._footer))

    def respond(self, path: str, query: Mapping[str, str]) -> Reply:
        """The answer to a GET of `path` (decoded, with any ";param") and its query parameters."""
        if path == ROBOTS_PATH:
            return _robots(self.spec)
        bare = path.split(";", 1)[0]
        on = self._on
        if bare == "/":
            return self._index()
        if bare.startswith("/page/") and bare.endswith(".html"):
            number = _number(bare[len("/page/"):-len(".html")])
            if number is not None and 1 <= number <= self.spec.normal_pages:
                return self._article(number, bare)
        elif "calendar" in on and bare.startswith("/cal/"):
            reply = self._calendar(bare)
            if reply is not None:
                return reply
        elif "session" in on and bare.startswith("/account/") and bare[len("/account/"):] in SESSION_PAGES:
            return self._session(bare[len("/account/"):], path + "?" + "&".join(f"{k}={v}" for k, v in query.items()))
        elif "search" in on and bare == "/search":
            return self._search(query)
        elif "relative" in on and bare.startswith("/docs/") and bare[len("/docs/"):].replace("sub/", "") == "":
            return self._html(bare, "Documentation", f'<p>{_a("sub/", "Subsection")} of the manual.</p>')
        elif "mirror" in on and bare.startswith("/mirror/") and _mirror_target(bare) is not None:
            return self._mirror(_mirror_target(bare) or "", bare)
        elif "fanout" in on and bare == "/links.html":
            return Reply(200, self._fanout_page())
        elif "fanout" in on and bare.startswith("/fan/"):
            number = _number(bare[len("/fan/"):])
            if number is not None and number < self.spec.fanout_links:
                return self._fan_entry(number, bare)
        return self._unknown(path)

    def _index(self) -> Reply:
        first = min(10, self.spec.normal_pages)
        items = "\n".join(f"<li>{_a(f'/page/{n}.html', self._title(n))}</li>" for n in range(1, first + 1))
        return self._html("/", "Front page", f"<p>Welcome to the {self.NAME}.</p>\n<ul>\n{items}\n</ul>")

    def _title(self, n: int) -> str:
        rng = _rng("title", self.spec.seed, n)
        return " ".join(rng.choice(VOCAB) for _ in range(3)).title()

    def _article(self, n: int, here: str) -> Reply:
        pages = self.spec.normal_pages
        rng = _rng("article", self.spec.seed, n)
        if self.spec.templated:
            paragraphs = f"<p>{prose(rng, rng.randint(20, 40))}</p>"
        else:
            paragraphs = "\n".join(f"<p>{prose(rng, rng.randint(40, 90))}</p>" for _ in range(rng.randint(2, 4)))
        more = {n % pages + 1, (n + 9) % pages + 1} - {n}
        links = " ".join(_a(f"/page/{m}.html", self._title(m)) for m in sorted(more))
        return self._html(here, self._title(n), f"{paragraphs}\n<p>Read more: {links}</p>")

    def _calendar(self, path: str) -> Reply | None:
        parts = path[len("/cal/"):].split("/")
        year, month = (_number(parts[0]), _number(parts[1])) if len(parts) == 2 else (None, None)
        if year is None or month is None or not (1 <= year <= 9999 and 1 <= month <= 12) or parts[1] != f"{month:02d}":
            return None
        index = year * 12 + month - 1

        def link(i: int, text: str) -> str:
            y, m = divmod(i, 12)
            return _a(f"/cal/{y}/{m + 1:02d}", text) if 1 <= y <= 9999 else ""

        name = f"{calendar.month_name[month]} {year}"
        rows = "\n".join("<tr>" + "".join(f"<td>{d or ''}</td>" for d in week) + "</tr>"
                         for week in calendar.monthcalendar(year, month))
        head = "".join(f"<th>{d}</th>" for d in calendar.day_abbr)
        nav = " ".join(x for x in (link(index - 12, "previous year"), link(index - 1, "previous month"),
                                   link(index + 1, "next month"), link(index + 12, "next year")) if x)
        body = (f"<p>Events calendar: {name}</p>\n<table><tr>{head}</tr>\n{rows}</table>\n"
                f"<p>No events are scheduled for {name}.</p>\n<p>{nav}</p>")
        return self._html(path, f"Events in {name}", body)

    def _session(self, page: str, request: str) -> Reply:
        others = [p for p in SESSION_PAGES if p != page]
        links = (_a(f"/account/{others[0]};jsessionid={_token('path', self.spec.seed, request)}", others[0]) + " "
                 + _a(f"/account/{others[1]}?sid={_token('query', self.spec.seed, request)}", others[1]))
        body = (f"<p>Your account: {page}. You are not signed in; a new session was started for you.</p>\n"
                f"<p>Go to {links}.</p>")
        return self._html(f"/account/{page}", f"Account {page}", body)

    def _search(self, query: Mapping[str, str]) -> Reply:
        q = "".join(c for c in query.get("q", "") if c.isalnum())[:40] or "news"
        n = _number(query.get("page", "1")) or 1
        rng = _rng("search", self.spec.seed, q, n)
        related = " ".join(_a(f"/search?q={w}&page=1", w) for w in (rng.choice(VOCAB), rng.choice(VOCAB)))
        body = (f"<p>Search results for {escape(q)}, page {n}: no results found.</p>\n"
                f"<p>{_a(f'/search?q={q}&page={n + 1}', 'next page')}</p>\n<p>Related searches: {related}</p>")
        return self._html("/search", f"Search: {q}", body)

    def _mirror(self, target: str, here: str) -> Reply:
        if target == "":
            return self._html(here, "Mirror root", f"<p>Index of the mirror: {_a('a/', 'a/')}</p>")
        if target == "a/":
            return self._html(here, "Mirror a", f"<p>Index of a: {_a('b/', 'b/')} {_a('c.html', 'c.html')}</p>")
        return self._html(here, "Mirror file c", "<p>The file c of the mirrored tree.</p>")

    def _fan_entry(self, number: int, here: str) -> Reply:
        if not self.spec.fanout_items:
            return self._html(here, f"Link list entry {number}",
                              f"<p>Entry {number} of the link list. There is nothing else on this page.</p>")
        rng = _rng("fan", self.spec.seed, number)
        more = " ".join(_a(f"/fan/{rng.randrange(self.spec.fanout_links)}", f"item {i}") for i in range(3))
        return self._html(here, self._title(number + 100_000), f"<p>{prose(rng, rng.randint(20, 40))}</p>\n"
                          f"<p>Related: {more}</p>")

    def _fanout_page(self) -> bytes:
        if self._fanout is None:
            links = "\n".join(f'<a href="/fan/{i}">{i}</a>' for i in range(self.spec.fanout_links))
            self._fanout = _page(self.NAME, self._nav("/links.html"), "All links", links, self._footer)
        return self._fanout

    def _unknown(self, path: str) -> Reply:
        if "soft404" not in self._on:
            if self.spec.templated:
                return self._html(path, "Page not found", "<p>Sorry, this page does not exist.</p>")
            return Reply(404, _page(self.NAME, self._nav(path), "Not found", "<p>404 not found</p>", self._footer))
        rng = _rng("soft404", self.spec.seed, path)
        w = [rng.choice(VOCAB) for _ in range(3)]
        links = _a(f"/wiki/{w[0].capitalize()}", w[0]) + " " + _a(f"/topics/{w[1]}/{w[2]}", f"{w[1]} {w[2]}")
        body = (f"<p>Sorry, the page {escape(path)} could not be found. It may have moved, or it never "
                f"existed.</p>\n<p>Perhaps you were looking for: {links}</p>")
        return self._html(path, "Page not found", body)


class ItemSite:
    """The pages of host 1, the legitimate large site, as a pure function: `respond(path, query)`."""

    NAME = "Item Catalogue"

    def __init__(self, spec: TrapSpec) -> None:
        self.spec = spec
        self._footer = escape(prose(_rng("item-footer", spec.seed), 50))
        self._nav = " | ".join((_a("/", "Catalogue"), _a("/items?page=1", "All items"), _a("/about.html", "About")))

    @property
    def listings(self) -> int:
        return -(-self.spec.items // ITEMS_PER_LISTING)

    def paths(self) -> list[str]:
        """Every path (with canonical query) a crawler must fetch."""
        return (["/", "/about.html"] + [f"/items?page={n}" for n in range(1, self.listings + 1)]
                + [f"/item/{n}" for n in range(1, self.spec.items + 1)])

    def _html(self, title: str, body: str) -> Reply:
        return Reply(200, _page(self.NAME, self._nav, title, body, self._footer))

    def title(self, n: int) -> str:
        rng = _rng("item-title", self.spec.seed, n)
        return " ".join(rng.choice(VOCAB) for _ in range(3)).title()

    def respond(self, path: str, query: Mapping[str, str]) -> Reply:
        if path == ROBOTS_PATH:
            return _robots(self.spec)
        if path == "/":
            return self._html("Catalogue", f"<p>{self.spec.items} items. {_a('/items?page=1', 'Browse all')}.</p>")
        if path == "/about.html":
            return self._html("About", f"<p>{prose(_rng('about', self.spec.seed), 80)}</p>")
        if path == "/items":
            page = _number(query.get("page", ""))
            if page is not None and 1 <= page <= self.listings:
                return self._listing(page)
        elif path.startswith("/item/"):
            number = _number(path[len("/item/"):])
            if number is not None and 1 <= number <= self.spec.items:
                return self._item(number)
        return Reply(404, _page(self.NAME, self._nav, "Not found", "<p>404 not found</p>", self._footer))

    def _listing(self, page: int) -> Reply:
        first = (page - 1) * ITEMS_PER_LISTING + 1
        last = min(page * ITEMS_PER_LISTING, self.spec.items)
        rows = "\n".join(f"<li>{_a(f'/item/{n}', self.title(n))}</li>" for n in range(first, last + 1))
        pages = sorted({1, self.listings} | set(range(max(1, page - 3), min(self.listings, page + 3) + 1)))
        pager = " ".join(_a(f"/items?page={p}", str(p)) for p in pages)
        return self._html(f"Items, page {page}", f"<ul>\n{rows}\n</ul>\n<p>Pages: {pager}</p>")

    def _item(self, n: int) -> Reply:
        rng = _rng("item", self.spec.seed, n)
        description = prose(rng, rng.randint(60, 150))
        related = sorted({rng.randint(1, self.spec.items) for _ in range(3)} - {n})
        links = " ".join(_a(f"/item/{m}", self.title(m)) for m in related)
        steps = " ".join(_a(f"/item/{m}", text) for m, text in ((n - 1, "previous"), (n + 1, "next"))
                         if 1 <= m <= self.spec.items)
        body = (f"<p>{description}</p>\n<p>Price: {rng.randint(1, 999)}.{rng.randint(0, 99):02d} EUR</p>\n"
                f"<p>Related: {links}</p>\n<p>{steps}</p>")
        return self._html(self.title(n), body)


def _robots(spec: TrapSpec) -> Reply:
    lines = ["User-agent: *", "Disallow:"]
    if spec.crawl_delay is not None:
        lines.append(f"Crawl-delay: {spec.crawl_delay:g}")
    return Reply(200, ("\n".join(lines) + "\n").encode(), _TEXT)


class TrapWeb:
    """The running trap site (host 0) and large site (host 1, when `spec.items` > 0).

    After start: `ports`, `base_urls`, `seed` (host 0's index), `items_seed` ("" without items), `counts`
    (Counter by URL as received), `times` ("127.0.0.1:PORT" -> monotonic request start times), `site`,
    `items`. Mutated on the loop thread; from another thread read them through `snapshot()`.
    """

    def __init__(self, spec: TrapSpec | None = None, *, shutdown_timeout: float = SHUTDOWN_TIMEOUT) -> None:
        self.spec = spec if spec is not None else TrapSpec()
        self.site = TrapSite(self.spec)
        self.items = ItemSite(self.spec)
        self._shutdown_timeout = shutdown_timeout
        self._runners: list[web.ServerRunner] = []
        self._socks: list[socket.socket] = []
        self._started = self._closed = False
        self.ports: list[int] = []
        self.base_urls: list[str] = []
        self.seed = self.items_seed = ""
        self.counts: Counter[str] = Counter()
        self.times: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    async def start(self) -> TrapWeb:
        """Bind free loopback ports and start serving."""
        if self._started:
            raise RuntimeError("TrapWeb.start() called twice")
        self._started = True
        sites: list[TrapSite | ItemSite] = [self.site] + ([self.items] if self.spec.items else [])
        for _ in sites:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._socks.append(sock)
            sock.bind((LOOPBACK, 0))
            sock.setblocking(False)
        self.ports = [s.getsockname()[1] for s in self._socks]
        self.base_urls = [f"http://{LOOPBACK}:{p}" for p in self.ports]
        self.seed = self.base_urls[0] + "/"
        self.items_seed = self.base_urls[1] + "/" if self.spec.items else ""
        self.times = {f"{LOOPBACK}:{p}": [] for p in self.ports}
        for host, (site, sock) in enumerate(zip(sites, self._socks)):
            server = web.Server(self._make_handler(host, site), handler_cancellation=True, access_log=None,
                                max_line_size=MAX_LINE_SIZE, max_field_size=MAX_LINE_SIZE)
            runner = web.ServerRunner(server, shutdown_timeout=self._shutdown_timeout)
            self._runners.append(runner)
            await runner.setup()
            await web.SockSite(runner, sock, backlog=BACKLOG).start()
        return self

    async def close(self) -> None:
        """Stop serving. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for runner in self._runners:  # a client that stopped reading a huge page must not hold the shutdown
            for conn in runner.server.connections if runner.server is not None else ():
                if conn.transport is not None:
                    conn.transport.abort()
        try:
            await asyncio.gather(*(r.cleanup() for r in self._runners), return_exceptions=True)
        finally:
            for sock in self._socks:
                sock.close()

    async def __aenter__(self) -> TrapWeb:
        try:
            return await self.start()
        except BaseException:
            await self.close()
            raise

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @classmethod
    @contextlib.contextmanager
    def serve_in_thread(cls, spec: TrapSpec | None = None, *, timeout: float = 30.0) -> Iterator[TrapWeb]:
        """Serve from a daemon thread with its own event loop; read counts through `snapshot()`."""
        with served_in_thread(cls(spec), "trapweb-loop", timeout) as trap:
            yield trap

    # --- what was requested -------------------------------------------------------------------------

    def snapshot(self, *, reset: bool = False) -> dict[str, Any]:
        """Copies of counts and times, safe from any thread: {"counts", "times", "total"}."""
        with self._lock:
            snap = {"counts": dict(self.counts), "times": {h: list(t) for h, t in self.times.items()},
                    "total": sum(self.counts.values())}
            if reset:
                self.counts.clear()
                for t in self.times.values():
                    t.clear()
        return snap

    def requests_by_kind(self, counts: Mapping[str, int] | None = None) -> Counter[str]:
        """Requests per part of the site (`classify`), from `counts` or a fresh snapshot."""
        if counts is None:
            counts = self.snapshot()["counts"]
        return requests_by_kind(counts, self.base_urls)

    def normal_urls(self) -> list[str]:
        """URLs on host 0 that a crawl must fetch (index and articles), as canonical URLs."""
        return [self.base_urls[0] + p for p in self.site.normal_paths()]

    def item_urls(self) -> list[str]:
        """URLs on host 1 that a crawl must fetch (every item and listing), as canonical URLs."""
        return [self.base_urls[1] + p for p in self.items.paths()] if self.spec.items else []

    # --- serving ------------------------------------------------------------------------------------

    def _make_handler(self, host: int, site: TrapSite | ItemSite) -> Any:
        base = self.base_urls[host]
        times = self.times[f"{LOOPBACK}:{self.ports[host]}"]
        counts, lock, monotonic = self.counts, self._lock, time.monotonic

        async def handle(request: web.BaseRequest) -> web.StreamResponse:
            raw = request.raw_path
            if host == 0 and request.path == STATS_PATH:
                return self._stats_response(request)
            now = monotonic()
            with lock:
                counts[base + raw] += 1
                times.append(now)
            reply = site.respond(request.path, request.query)
            return web.Response(status=reply.status, body=reply.body, headers={hdrs.CONTENT_TYPE: reply.content_type})

        return handle

    def _stats_response(self, request: web.BaseRequest) -> web.Response:
        snap = self.snapshot(reset=request.query.get("reset") == "1")
        if request.query.get("times") == "0":
            del snap["times"]
        snap.update(ports=self.ports, seed=self.seed, items_seed=self.items_seed,
                    by_kind=dict(self.requests_by_kind(snap["counts"])))
        return web.Response(text=json.dumps(snap), content_type="application/json")


def requests_by_kind(counts: Mapping[str, int], base_urls: Sequence[str]) -> Counter[str]:
    """Sort counted requests ("http://127.0.0.1:PORT/target" -> n) into `classify` kinds."""
    hosts = {base: i for i, base in enumerate(base_urls)}
    out: Counter[str] = Counter()
    for url, n in counts.items():
        slash = url.find("/", len("http://"))
        base, target = (url[:slash], url[slash:]) if slash >= 0 else (url, "/")
        out[classify(unquote(target.split("?", 1)[0]), host=hosts.get(base, 0))] += n
    return out


# --- command line ---------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    d = TrapSpec()
    p = argparse.ArgumentParser(prog="python -m frontier.testing.traps",
                                description="Serve the trap site and the large item site on loopback ports.")
    p.add_argument("--normal-pages", type=int, default=d.normal_pages)
    p.add_argument("--traps", default=",".join(d.traps), help=f"comma-separated, from {','.join(TRAPS)}; '' for none")
    p.add_argument("--fanout-links", type=int, default=d.fanout_links)
    p.add_argument("--items", type=int, default=d.items)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--crawl-delay", type=float, default=None)
    p.add_argument("--templated", action="store_true", help="short articles in one template, unknown paths 200")
    p.add_argument("--exit-with-parent", action=argparse.BooleanOptionalAction, default=True)
    return p


async def _serve(spec: TrapSpec, exit_with_parent: bool) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    parent = os.getppid()
    async with TrapWeb(spec) as trap:
        info = {"ports": trap.ports, "base_urls": trap.base_urls, "seed": trap.seed, "items_seed": trap.items_seed,
                "stats_url": trap.base_urls[0] + STATS_PATH, "pid": os.getpid(), "spec": asdict(spec)}
        sys.stdout.write(json.dumps(info) + "\n")
        sys.stdout.flush()
        while not stop.is_set() and not (exit_with_parent and os.getppid() != parent):
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await stop.wait()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        spec = TrapSpec(normal_pages=args.normal_pages, traps=tuple(t for t in args.traps.split(",") if t),
                        fanout_links=args.fanout_links, items=args.items, seed=args.seed,
                        crawl_delay=args.crawl_delay, templated=args.templated)
    except ConfigError as exc:
        print(f"traps: {exc}", file=sys.stderr)
        return 2
    with asyncio.Runner(loop_factory=new_loop) as runner:
        runner.run(_serve(spec, args.exit_with_parent))
    return 0


if __name__ == "__main__":
    sys.exit(main())
