"""Crawler-trap defences: frontier.crawl.traps (URL patterns, page sketches, the detector) and the trap site
frontier.testing.traps, served for real on loopback, and crawled (`simulate`) from its pure page function by a
small loop built from the real parts (canonicalize, Scope, TrapDetector, extract_links) the way frontier.crawl
wires them: suspects go to a low queue per host, fetched last and within a budget. The real crawler over
loopback is tests/test_traps_crawl.py; the real-site corpus is tests/test_traps_corpus.py."""

from __future__ import annotations

import collections
import itertools
import json
import math
import random
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

from frontier.crawl.traps import (
    DEFAULT_MAX_SUSPECT_PAGES,
    FAN_OUT,
    REFERENCES,
    SOFT_404,
    TRAP_BUDGET,
    TRAP_PATTERN,
    WINDOW,
    PageSketch,
    TrapDetector,
    difference,
    hamming,
    near_duplicate,
    sketch,
    url_pattern,
)
from frontier.crawl.scheduler import Frontier
from frontier.errors import ConfigError, InvalidURL, StorageError
from frontier.testing import TrapSpec, TrapWeb, fetch_stats
from frontier.testing.templateweb import TemplateSite, TemplateSpec
from frontier.testing.traps import TRAPS, VOCAB, ItemSite, Reply, TrapSite, classify, prose
from frontier.url.canonical import CanonicalRules, canonicalize
from frontier.url.scope import Scope
from workers.links import extract_links
from workers.links import page_text as worker_page_text

ROOT = Path(__file__).resolve().parents[1]
SPEC = TrapSpec(fanout_links=2_000)  # the pure-site tests need no 200,000-link page
SITE, ITEMS = TrapSite(SPEC), ItemSite(SPEC)
GAZETTE, SHOP = "http://gazette.test", "http://shop.test"


def page_text(body: bytes) -> str:
    """The visible text of a page, as the worker sketches it (workers.links.page_text)."""
    return worker_page_text(LexborHTMLParser(body))


def reply_at(site: TrapSite | ItemSite, path_and_query: str) -> Reply:
    path, _, query = path_and_query.partition("?")
    return site.respond(path, dict(p.split("=", 1) for p in query.split("&")) if query else {})


def sketch_at(site: TrapSite | ItemSite, path_and_query: str) -> tuple[int, PageSketch | None]:
    reply = reply_at(site, path_and_query)
    return reply.status, sketch(page_text(reply.body))


# --- URL patterns --------------------------------------------------------------------------------

PATTERN_TABLE = [
    ("http://h/cal/2024/05", "/cal/N/N"),
    ("http://h/search?page=3&q=foo", "/search?page&q"),
    ("http://h/search?q=bar&page=1", "/search?page&q"),
    ("http://h/account/help;jsessionid=83B3CE86F4CDD0E19A6DEA852FCC0241", "/account/help;jsessionid"),
    ("http://h/account/help?sid=8f89b3297be5863814e26ef555fe6b6a", "/account/help?sid"),
    ("http://h/account/help;jsessionid=1?sid=2", "/account/help;jsessionid?sid"),
    ("http://h/item/123", "/item/N"),
    ("http://h/p/5.html", "/p/N.html"),
    ("http://h/news/2024-05-01/story", "/news/N-N-N/story"),
    ("http://h/u/550e8400-e29b-41d4-a716-446655440000/", "/u/X/"),
    ("http://h/u/6ba7b810-9dad-11d1-80b4-00c04fd430c8/", "/u/X/"),
    ("http://h/f/a94a8fe5ccb19ba61c4c0873d391e987982fbbd3", "/f/X"),  # a SHA-1
    ("http://h/t/kdjfhgkdjfhgkdjfhgkdjfhgzz", "/t/X"),  # 24+ characters: a random token even without digits
    ("http://h/s/(S(x1y2z3w4v5))/page", "/s/(S(X))/page"),  # ASP.NET cookieless session
    ("http://h/wiki/Main_Page", "/wiki/Main_Page"),  # words stay
    ("http://h/products/shoe-12345.html", "/products/shoe-N.html"),
    ("http://h/v2/api", "/vN/api"),
    ("http://h/a;v=1.2/b", "/a;v/b"),
    ("http://h/a?b=1&b=2&a=", "/a?a&b"),
    ("http://h/a?id123=1", "/a?idN"),
    ("http://h/a#frag", "/a"),
    ("http://h:8080/x?y", "/x?y"),
    ("http://h/", "/"),
    ("http://h", "/"),
]


@pytest.mark.parametrize(("url", "pattern"), PATTERN_TABLE)
def test_url_pattern_table(url: str, pattern: str) -> None:
    assert url_pattern(url) == pattern


def canonical_or_none(text: str) -> str | None:
    try:
        return canonicalize("http://h.example/" + text)
    except InvalidURL:
        return None


@given(st.text(max_size=80))
def test_url_pattern_never_raises_and_folds_every_digit(tail: str) -> None:
    url = canonical_or_none(tail)
    if url is None:
        return
    pattern = url_pattern(url)
    assert pattern.startswith("/")
    assert not re.search(r"[0-9]", pattern)
    assert url_pattern(url) == url_pattern(url.replace("http://h.example", "https://other.example:8080"))


@given(st.lists(st.tuples(st.sampled_from(["q", "page", "sid", "p1"]), st.text("abc0123", max_size=8)),
                max_size=5), st.integers(min_value=0, max_value=10**9))
def test_url_pattern_ignores_query_values_order_and_digit_values(params: list[tuple[str, str]], number: int) -> None:
    query = "&".join(f"{k}={v}" for k, v in params)
    other = "&".join(f"{k}=z{v[::-1]}" for k, v in reversed(params))
    digits = str(number)
    same_length = "".join(str((int(d) + 7) % 10) for d in digits)
    assert url_pattern(f"http://h/a/{digits}?{query}") == url_pattern(f"http://h/a/{same_length}?{other}")


# --- the sketch ------------------------------------------------------------------------------------

def reference_sketch(text: str) -> PageSketch | None:
    """The definition in plain Python ints: xxh3-64 of each distinct word 3-shingle, per-bit majority."""
    import xxhash

    words = re.findall(rb"[a-z\x80-\xff]+", text.replace("\u00a0", " ").encode("utf-8", "surrogatepass").lower())
    if not words:
        return None
    if len(words) >= 3:
        feats = list({xxhash.xxh3_64_intdigest(b" ".join(words[i : i + 3])) for i in range(len(words) - 2)})
    else:
        feats = list({xxhash.xxh3_64_intdigest(w) for w in words})
    value = sum(1 << b for b in range(64) if 2 * sum((f >> b) & 1 for f in feats) > len(feats))
    return PageSketch(value, len(feats))


@pytest.mark.parametrize("text", ["", "one", "one two", "Hello, World! Hello again, world: 2024.",
                                  "caf\u00e9 na\u00efve \u00fcber\u00a0alles stra\u00dfe " * 5,
                                  prose(random.Random(3), 400)])
def test_sketch_matches_the_reference(text: str) -> None:
    assert sketch(text) == reference_sketch(text)


def test_a_repeated_template_does_not_make_distinct_pages_near_duplicates() -> None:
    """Pages of 120 words of their own under a list of 20 links all reading "link" (the mock web's pages):
    weighted by count, the repeated shingle outvoted the own text (5-9 bits apart, "6-13 words" apart)."""
    rng = random.Random(5)
    vocabulary = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=6)) for _ in range(130)]
    pages = [" ".join(rng.choices(vocabulary, k=120)) + " link" * 20 for _ in range(6)]
    sketches = [sketch(p) for p in pages]
    assert all(s is not None for s in sketches)
    for a, b in itertools.combinations(sketches, 2):
        assert not near_duplicate(a, b), (hamming(a.simhash, b.simhash), difference(a, b))


def test_sketch_ignores_case_punctuation_and_numbers() -> None:
    assert sketch("") is None and sketch("  \n ") is None and sketch("2024 -- 12:30, 55%") is None
    a = sketch("Page 1 of 10. Results for: cheap flights!")
    assert a == sketch("page 7 of 99 -- RESULTS for cheap (flights)") and a is not None
    assert a.shingles == 4  # "page of results for cheap flights": 6 words, 4 shingles
    assert difference(a, a) == 0 and near_duplicate(a, a)


ARTICLE = """The city council voted on Tuesday to extend the evening bus service on three routes through the
winter, after a petition signed by more than four thousand residents. The extension will cost about two hundred
thousand a year and is paid for by the parking fund. Drivers' representatives welcomed the decision but warned
that the depot is already short of staff, and that new drivers need six weeks of training before they can take a
route alone. The council expects the first late buses to run in the second week of next month, and will review
the numbers of passengers in the spring before deciding whether to keep the service for good."""
OTHER_ARTICLE = """A small bakery on the harbour front has won the regional prize for its rye bread, beating
more than sixty entries from across the coast. The owner, who opened the shop eleven years ago with a single
oven, said the recipe came from her grandmother and has not changed since. Judges praised the crust and the
slightly sour taste, and asked how long the dough is left to rest; the answer, a full night in a cool cellar, is
the only secret she was willing to share. The prize comes with a trip to the national fair in the autumn."""
TEMPLATE = ("Home News Sport Weather Culture Opinion Local Contact us Subscribe Log in " + prose(random.Random(8), 150))


def article_page(body: str, *, date: str = "Published 12 March 2024, 09:14", views: str = "1,204 views") -> str:
    half = len(TEMPLATE) // 2
    return f"{TEMPLATE[:half]} {date} {views} {body} Share this article {TEMPLATE[half:]}"


def test_near_duplicates_on_realistic_pages() -> None:
    page = sketch(article_page(ARTICLE))
    assert page is not None
    restamped = sketch(article_page(ARTICLE, date="Updated 13 March 2024, 18:02", views="5,911 views"))
    assert restamped is not None and near_duplicate(page, restamped)
    other = sketch(article_page(OTHER_ARTICLE))
    assert other is not None and not near_duplicate(page, other)
    assert hamming(page.simhash, other.simhash) > 16 and difference(page, other) > 60
    # a paragraph of 60 new words is new content, even on an otherwise identical page
    longer = sketch(article_page(ARTICLE + " " + prose(random.Random(4), 60)))
    assert longer is not None and not near_duplicate(page, longer)
    # unrelated texts: about 32 bits apart
    far = [hamming(sketch(prose(random.Random(i), 200)).simhash, sketch(prose(random.Random(i + 100), 200)).simhash)
           for i in range(20)]
    assert 24 <= sorted(far)[10] <= 40


def test_a_large_template_does_not_make_distinct_pages_near_duplicates() -> None:
    """With 1,000 shared words, pages with 60 words of their own are a few bits apart: the relative test
    alone calls nearly every pair a near-duplicate. The estimated difference keeps most pairs apart, and
    the detector, which wants most of a pattern's recent pages alike, never marks such a site."""
    template = prose(random.Random(99), 1000)
    pages = [sketch(f"{template[:3000]} {prose(random.Random(n), 60)} {template[3000:]}") for n in range(300)]
    pairs = [(a, b) for i, a in enumerate(pages[:12]) for b in pages[i + 1 : 12]]
    assert sum(hamming(a.simhash, b.simhash) <= 16 for a, b in pairs) >= 0.9 * len(pairs)
    assert sorted(difference(a, b) for a, b in pairs)[len(pairs) // 2] > 40
    assert sum(near_duplicate(a, b) for a, b in pairs) <= 0.2 * len(pairs)
    detector = TrapDetector()
    for n, page in enumerate(pages):
        detector.observe(f"{SHOP}/product/{n}", page)
    assert detector.traps() == []


def test_sketch_speed_on_100_kb() -> None:
    """100 KB: under the MAX_WORDS cap (20,000 words), so every word counts. CPU time of this process, not
    wall time: a CI machine loaded by other processes (load 15 on 2 cores) tripled the wall time once."""
    text = " ".join(page_text(reply_at(SITE, f"/page/{n}.html").body) for n in range(1, 51))
    text = (text * (100_000 // len(text) + 1))[:100_000]
    best = math.inf
    for _ in range(3):
        start = time.process_time()
        sketch(text)
        best = min(best, time.process_time() - start)
    us_per_kb = best * 1e6 / 100
    print(f"sketch: {us_per_kb:.1f} us per KB of text ({best * 1e3:.1f} ms for 100 KB)")
    assert us_per_kb < 200  # about 15-30 on the 2-core development machine; a loose bound for a busy one


# --- the detector: pure rules, then a crawl of the sites built from pure functions ------------------------------


Respond = Callable[[str], tuple[int, bytes]]  # URL -> (HTTP status, body)


@dataclass
class Simulation:
    """What `simulate` did: {URL: fetches}, URLs left in the low queues, skip reasons, the detector."""

    fetched: Counter[str]
    left: list[str]
    reasons: Counter[str]
    detector: TrapDetector


def simulate(respond: Respond, seeds: list[str], *, detector: TrapDetector, scope: Scope | None = None,
             rules: CanonicalRules = CanonicalRules(strip_session_ids=True), budget: int = 100_000) -> Simulation:
    """A crawl the way frontier.crawl wires the detector, one fetch at a time: a host's probe first; a page
    sketched only when the detector wants it; its new links queued normal, or low (a suspected pattern, a
    soft 404's links, a huge fan-out's links); a normal entry of a pattern suspected since it was queued moves
    to the low band when its turn comes; low entries are fetched when no normal one is left, each as the
    detector admits it (`admit`: its pattern's budget), else parked for the run (left)."""
    normal: collections.deque[tuple[str, int]] = collections.deque()
    low: collections.deque[tuple[str, int]] = collections.deque()
    parked: list[str] = []
    seen: set[str] = set()
    fetched: Counter[str] = Counter()
    reasons: Counter[str] = Counter()

    def offer(url: str, depth: int, is_low: bool) -> bool:
        if scope is not None and (reason := scope.check(url)):
            reasons[f"link_{reason}"] += 1
            return False
        if detector.needs_probe(url) and (probe := detector.probe_url(url)) not in seen:
            seen.add(probe)
            normal.appendleft((probe, 1))
        if url in seen:
            return False
        seen.add(url)
        if is_low or detector.check(url, depth):
            low.append((url, depth))
        else:
            normal.append((url, depth))
        return True

    for seed in seeds:
        offer(canonicalize(seed, rules=rules), 0, False)
    while sum(fetched.values()) < budget:
        if normal:
            url, depth = normal.popleft()
            if detector.check(url, depth):
                reasons[TRAP_PATTERN] += 1
                low.append((url, depth))
                continue
        elif low:
            url, depth = low.popleft()
            if not detector.admit(url):
                reasons[TRAP_BUDGET] += 1
                parked.append(url)
                continue
        else:
            break
        fetched[url] += 1
        status, body = respond(url)
        links = [u for u in extract_links(body, url, rules=rules, max_links=MAX_LINKS).links
                 if scope is None or scope.check(u) is None] if status == 200 else []
        page = sketch(page_text(body)) if status == 200 and detector.wants_sketch(url) else None
        verdict = detector.observe(url, page, status=status, depth=depth, outlinks=links)
        if detector.is_probe(url):
            continue
        if verdict:
            reasons[verdict] += 1
        if status == 200:
            fan = depth + 1 >= 2 and len(links) >= FAN_OUT
            new = [u for u in links if offer(u, depth + 1, verdict == SOFT_404 or fan)]
            detector.learn(url, page, new, soft_404=verdict == SOFT_404)
    return Simulation(fetched, parked + [u for u, _ in low], reasons, detector)


def site_respond(*sites: tuple[str, TrapSite | ItemSite]) -> Respond:
    """The pages of the trap site's hosts at the given origins, as `simulate` fetches them."""
    by_origin = dict(sites)

    def respond(url: str) -> tuple[int, bytes]:
        slash = url.index("/", len("http://"))
        reply = reply_at(by_origin[url[:slash]], url[slash:])
        return reply.status, reply.body

    return respond


def page(title: str, links: list[str], words: str = "") -> bytes:
    """A page in one template: a title, a line of its own, a list of links, the same filler everywhere."""
    items = "".join(f'<li><a href="{href}">{text}</a></li>' for href, text in zip(links, links))
    return (f"<html><body><h1>{title}</h1><p>{words}</p><ul>{items}</ul><footer>{FILLER}</footer>"
            "</body></html>").encode()


FILLER = prose(random.Random(21), 36)


def templated_web(hosts: int, sections: int, leaves: int) -> dict[str, bytes]:
    """Issue 21's plain web: per host a home page, section pages and leaf pages /sN/pM.html in one template,
    each leaf a line of text of its own and a list of links to the next leaves of its section."""
    rng = random.Random(7)
    pages: dict[str, bytes] = {}
    for h in range(hosts):
        origin = f"http://site{h}.test"
        pages[origin + "/"] = page("Home", [f"{origin}/s{s}/" for s in range(sections)])
        for s in range(sections):
            leaf = [f"{origin}/s{s}/p{m}.html" for m in range(leaves)]
            pages[f"{origin}/s{s}/"] = page(f"Section {s}", leaf[:5])
            for m in range(leaves):
                pages[leaf[m]] = page(f"Item {s} {m}", leaf[m + 1:m + 6] + [origin + "/"],
                                      " ".join(rng.choice(VOCAB) for _ in range(8)))
    return pages


def test_a_templated_web_is_fetched_whole() -> None:
    """Issue 21, case 2 (20,000 pages on 100 hosts there, 4,000 on 20 here): leaves in one template with a
    line of their own link further leaves: near-duplicates that keep adding URLs of their pattern. They may
    be suspected, so queued later, but every one is fetched: the low queue is within its budget."""
    pages = templated_web(20, 10, 20)

    def respond(url: str) -> tuple[int, bytes]:
        body = pages.get(url)
        return (404, b"not found") if body is None else (200, body)

    sim = simulate(respond, [f"http://site{h}.test/" for h in range(20)], detector=TrapDetector())
    assert set(pages) - set(sim.fetched) == set()
    assert sim.left == []
    assert max(sim.fetched.values()) == 1


def test_the_seed_of_a_templated_site_is_not_a_soft_404() -> None:
    """Issue 21, case 3: the probe's answer shares the template of every page. A seed (depth 0), a page linked
    from a seed (depth 1), and a deeper page whose links are not the answer's are never soft 404s; a deeper
    page with the answer's text and links is one."""
    template = TrapSite(TrapSpec(templated=True, traps=()))
    detector = TrapDetector()
    answer = reply_at(template, "/no/such/page")
    assert answer.status == 200
    nav = list(extract_links(answer.body, GAZETTE + "/no/such/page").links)
    probe = detector.probe_url(GAZETTE + "/")
    assert detector.observe(probe, sketch(page_text(answer.body)), outlinks=nav) == SOFT_404
    alike = sketch(page_text(answer.body))
    listing = [f"{GAZETTE}/page/{n}.html" for n in range(1, 11)]
    for depth in (0, 1):
        assert detector.observe(GAZETTE + "/start.html", alike, depth=depth, outlinks=nav + listing) is None
        assert detector.observe(GAZETTE + "/start.html", alike, depth=depth, outlinks=nav) is None
    assert detector.observe(GAZETTE + "/deep.html", alike, depth=3, outlinks=nav + listing) is None
    assert detector.observe(GAZETTE + "/deep.html", alike, depth=3, outlinks=nav) == SOFT_404
    # and the whole site: every page fetched, nothing left
    sim = simulate(site_respond((GAZETTE, template)), [GAZETTE + "/"], detector=TrapDetector())
    assert {GAZETTE + p for p in template.normal_paths()} - set(sim.fetched) == set()
    assert sim.left == []


def test_short_alike_pages_with_new_outlinks_are_never_suspected() -> None:
    """Issue 21, case 1: short pages alike ("No usage of X") are not a trap when each adds a new URL outside its
    pattern; nor, alike and barren, when the pattern stops growing."""
    detector = TrapDetector(soft_404=False)
    usage = sketch("No usage of class AbstractVisitor in this module. Overview Package Class Use Tree Help")
    for n in range(200):
        url = f"{GAZETTE}/class-use/Visitor{n}.html"
        assert detector.wants_sketch(url) is False  # never watched: nothing to sketch
        detector.learn(url, usage, [f"{GAZETTE}/detail/{n}/index.html", f"{GAZETTE}/class-use/Visitor{n + 1}.html"])
        assert detector.check(f"{GAZETTE}/class-use/Visitor{n + 1}.html") is None
    assert detector.traps() == []
    # alike and barren, 40 of them linked from one index page (javadoc's class-use pages): they may be suspected,
    # so fetched last, but every one is fetched
    index = [f"{GAZETTE}/use/Class{n}.html" for n in range(40)]
    pages = {GAZETTE + "/": page("Index", [GAZETTE + "/all.html"]), GAZETTE + "/all.html": page("All", index)}
    pages.update((url, page("Use", [GAZETTE + "/", GAZETTE + "/all.html"], "No usage of this class")) for url in index)
    sim = simulate(lambda url: (200, pages[url]) if url in pages else (404, b""), [GAZETTE + "/"],
                   detector=TrapDetector())
    assert set(pages) - set(sim.fetched) == set() and sim.left == []


def months(count: int) -> list[str]:
    return [f"/cal/{2024 + m // 12}/{m % 12 + 1:02d}" for m in range(count)]


def test_a_growing_near_duplicate_pattern_is_suspected_and_cleared_when_it_finds_content() -> None:
    detector = TrapDetector(soft_404=False)
    cal = months(80)
    detector.learn(GAZETTE + "/", None, [GAZETTE + cal[0]])
    n = 0
    for n, path in enumerate(cal[:-2]):
        url = GAZETTE + path
        page = sketch_at(SITE, path)[1] if detector.wants_sketch(url) else None
        detector.learn(url, page, [GAZETTE + cal[n + 1], GAZETTE + cal[n + 2]] if n == 0 else [GAZETTE + cal[n + 2]])
        if detector.check(GAZETTE + cal[n + 2]):
            break
    # a window (WINDOW pages) to measure growth, then WINDOW pages of growth with alike pages as evidence
    assert 2 * WINDOW <= n + 1 <= 2 * WINDOW + 4, n
    assert [(h, p) for h, p, _ in detector.traps()] == [("gazette.test", "/cal/N/N")]
    figures = detector.growth("gazette.test", "/cal/N/N")
    assert figures is not None and figures["new_per_page"] == 1.0 and figures["growing"], figures
    assert detector.check(GAZETTE + cal[-1], 1) is None  # a seed's link never
    assert detector.check(SHOP + cal[-1]) is None  # per host
    for i in range(n + 2, n + 2 + WINDOW + 1):  # its pages start to link new pages elsewhere: content
        detector.learn(GAZETTE + cal[i], sketch_at(SITE, cal[i])[1], [GAZETTE + cal[i + 1], f"{GAZETTE}/page/{i}.html"])
    assert detector.traps() == [] and detector.check(GAZETTE + cal[-1]) is None


def test_a_converging_pattern_is_cleared_and_one_that_keeps_growing_is_parked_past_its_budget() -> None:
    """Same URL shape, opposite structures: a finite catalogue whose pages first find many new items and then
    fewer (/item/N), an infinite calendar (/cal/N/N) that finds new months at a steady rate."""
    detector = TrapDetector(soft_404=False, max_suspect_pages=50)
    rng = random.Random(3)
    items = [f"{SHOP}/item/{i}" for i in range(400)]
    seen = {items[0]}
    for i in range(400):  # each item links 12 random items: new ones get rarer as the crawl covers the catalogue
        links = [u for u in rng.sample(items, 12) if u not in seen]
        seen.update(links)
        detector.learn(items[i], None, links)
    assert detector.traps() == [] or [p for _, p, _ in detector.traps()] != ["/item/N"]
    figures = detector.growth("shop.test", "/item/N")
    assert figures is not None and not figures["growing"] and figures["new_per_page"] < 0.5, figures
    cal = [f"{SHOP}/cal/{n}/01" for n in range(2000)]
    for i in range(200):
        detector.learn(cal[i], None, [cal[2 * i + 1], cal[2 * i + 2]])  # two new months a page, for ever
    assert detector.check(cal[1999]) == TRAP_PATTERN
    admitted = sum(detector.admit(url) for url in cal[200:400])
    assert admitted == 50  # its budget, while it grows
    assert detector.admit(items[5])  # the catalogue is never held back


def trap_site_sim(spec: TrapSpec, detector: TrapDetector, rules: CanonicalRules = CanonicalRules(strip_session_ids=True)) -> Simulation:
    web = (GAZETTE, TrapSite(spec)), (SHOP, ItemSite(spec))
    return simulate(site_respond(*web), [GAZETTE + "/", SHOP + "/items?page=1"], detector=detector, rules=rules,
                    scope=Scope(allowed_hosts=["gazette.test", "shop.test"]))


TRAP_REQUESTS = 5_000  # the trap site's bound: trap requests of a whole crawl


def trap_requests(fetched: Counter[str]) -> Counter[str]:
    kinds: Counter[str] = Counter()
    for url, n in fetched.items():
        slash = url.index("/", len("http://"))
        kinds[classify(url[slash:].split("?", 1)[0], host=int(url[:slash] == SHOP))] += n
    return kinds


@pytest.mark.parametrize(("templated", "fanout_items"), [(False, False), (True, False), (True, True)],
                         ids=["plain", "templated", "growing-fan-out"])
def test_the_trap_site_ends_by_itself_and_misses_nothing(templated: bool, fanout_items: bool) -> None:
    """Default detector and canonical rules (session ids stripped, as configs/crawl.yaml), 6,000 links a page:
    every article and item fetched, the traps within TRAP_REQUESTS, in every variant of the site (with
    `fanout_items` the 200,000-link page's items are distinct pages that keep linking more of them: no likeness
    to go by, only growth)."""
    spec = TrapSpec(fanout_links=200_000, items=600, templated=templated, fanout_items=fanout_items)
    sim = trap_site_sim(spec, TrapDetector(), CanonicalRules(strip_session_ids=True))
    site, items = TrapSite(spec), ItemSite(spec)
    wanted = {GAZETTE + p for p in site.normal_paths()} | {SHOP + p for p in items.paths()}
    assert wanted - set(sim.fetched) == set()
    kinds = trap_requests(sim.fetched)
    print(f"trap site ({'templated' if templated else 'plain'}): {sum(sim.fetched.values())} requests, "
          f"{dict(kinds)}; {len(sim.left)} left as suspects; {dict(sim.reasons)}")
    assert sum(n for kind, n in kinds.items() if kind not in ("normal", "items")) <= TRAP_REQUESTS
    assert not [p for _, p, _ in sim.detector.traps() if p.startswith(("/item", "/page"))]
    assert not [u for u in sim.left if u in wanted]


def template_web_sim(spec: TemplateSpec, detector: TrapDetector) -> tuple[Simulation, set[str]]:
    """A crawl (`simulate`) of a generated web of plain template pages (frontier.testing.templateweb), hosts
    "http://tN.test"; returns it and every URL a complete crawl fetches."""
    site = TemplateSite(spec)
    origins = [f"http://t{h}.test" for h in range(spec.hosts)]
    by_origin = {origin: h for h, origin in enumerate(origins)}

    def respond(url: str) -> tuple[int, bytes]:
        slash = url.index("/", len("http://"))
        return site.respond(by_origin[url[:slash]], url[slash:], origins)

    sim = simulate(respond, [origins[0] + "/"], detector=detector, budget=spec.pages + 10 * spec.hosts)
    return sim, {origin + path for h, origin in enumerate(origins) for path in site.paths(h)}


def test_a_released_pattern_is_cleared_at_load_and_never_suspected_again() -> None:
    cal = [f"{SHOP}/cal/{n}/01" for n in range(2000)]
    growing = TrapDetector(soft_404=False, max_suspect_pages=10)
    for i in range(200):
        growing.learn(cal[i], None, [cal[2 * i + 1], cal[2 * i + 2]])
    assert growing.check(cal[1999]) == TRAP_PATTERN
    assert sum(growing.admit(url) for url in cal[200:300]) == 10
    state = growing.host_state("shop.test")
    for release in (["/cal/N/N"], ["shop.test /cal/N/N"]):
        released = TrapDetector(soft_404=False, max_suspect_pages=10, release=release)
        released.load_host("shop.test", state)
        assert released.check(cal[1999]) is None and all(released.admit(url) for url in cal[300:400])
        for i in range(200, 400):
            released.learn(cal[i], None, [cal[2 * i + 1], cal[2 * i + 2]])
        assert released.traps() == []
    other_host = TrapDetector(soft_404=False, release=["gazette.test /cal/N/N"])
    other_host.load_host("shop.test", state)
    assert other_host.check(cal[1999]) == TRAP_PATTERN
    with pytest.raises(ConfigError):
        TrapDetector(release=["cal/N/N"])


@pytest.mark.parametrize("host,cleared", [("shop.test", True), ("", True), ("gazette.test", False)])
def test_a_pattern_released_while_the_crawl_runs_is_cleared_at_once_and_never_suspected_again(
        host: str, cleared: bool) -> None:
    cal = [f"{SHOP}/cal/{n}/01" for n in range(2000)]
    detector = TrapDetector(soft_404=False, max_suspect_pages=10)
    for i in range(200):
        detector.learn(cal[i], None, [cal[2 * i + 1], cal[2 * i + 2]])
    assert detector.check(cal[1999]) == TRAP_PATTERN
    assert detector.release(host, "/cal/N/N") is cleared
    if not cleared:  # another host's pattern of the same shape: this one stays suspected
        assert detector.check(cal[1999]) == TRAP_PATTERN
        return
    assert detector.check(cal[1999]) is None and all(detector.admit(url) for url in cal[300:400])
    for i in range(200, 400):
        detector.learn(cal[i], None, [cal[2 * i + 1], cal[2 * i + 2]])
    assert detector.traps() == []
    assert detector.release(host, "/cal/N/N") is False  # released already
    reloaded = TrapDetector(soft_404=False, max_suspect_pages=10)
    reloaded.load_host("shop.test", detector.host_state("shop.test"))
    assert reloaded.traps() == []  # its verdict is in the host state the crawl stores


def test_large_hosts_of_one_pattern_of_plain_template_pages_are_fetched_whole() -> None:
    """Hosts of thousands of distinct short pages under one pattern (/sN/pN.html): while the crawl covers a
    host its pattern grows, then converges; every page is fetched and nothing is left."""
    spec = TemplateSpec(hosts=6, pages=6_000, large=(3_000, 1_500, 1_000))
    sim, wanted = template_web_sim(spec, TrapDetector())
    print(f"template web: {sum(sim.fetched.values())} requests, {len(sim.left)} left; {dict(sim.reasons)}")
    assert wanted - set(sim.fetched) == set()
    assert sim.left == []


def test_trap_patterns_alone_suspect_each_trap() -> None:
    spec = TrapSpec(fanout_links=MAX_LINKS, items=200, traps=tuple(t for t in TRAPS if t != "soft404"))
    sim = trap_site_sim(spec, TrapDetector(soft_404=False), CanonicalRules(strip_session_ids=True))
    patterns = {p for _, p, _ in sim.detector.traps()}
    assert {"/cal/N/N", "/search?page&q", "/fan/N"} <= patterns, patterns
    assert sim.reasons[TRAP_BUDGET] > 4000  # most of the 6,000 /fan/N links, queued low, parked past the budget
    kinds = trap_requests(sim.fetched)
    assert kinds["fanout"] <= DEFAULT_MAX_SUSPECT_PAGES + 100 and kinds["relative"] == 3 and kinds["mirror"] == 9


def test_the_soft_404_trap_is_bounded_and_no_article_is_one() -> None:
    """The probe's path, so its answer, depends on the host (and its port): on 50 hosts no article is a soft
    404 and the soft-404 trap stays within the low queue's budget."""
    spec = TrapSpec(traps=("soft404",), items=0)
    for i in range(50):
        origin = f"http://h{i}.test:{8000 + i}"
        sim = simulate(site_respond((origin, TrapSite(spec))), [origin + "/"],
                       detector=TrapDetector(max_suspect_pages=300))
        assert {origin + p for p in TrapSite(spec).normal_paths()} - set(sim.fetched) == set()
        assert sum(sim.fetched.values()) <= 51 + 300 + 60, (origin, sum(sim.fetched.values()))
        assert sim.reasons[SOFT_404] >= 1


def test_state_round_trips_and_resumes_the_same() -> None:
    """Persist after every few pages, reload into a fresh detector, carry on: the same verdicts and suspects
    as a detector that never stopped."""
    spec = TrapSpec(fanout_links=300, items=50)
    web = site_respond((GAZETTE, TrapSite(spec)), (SHOP, ItemSite(spec)))
    straight = trap_site_sim(spec, TrapDetector())
    saved: dict[str, bytes] = {}
    holder = [TrapDetector()]

    class Reloading(TrapDetector):  # every 7th learn: store the changed hosts, "crash", reload what was stored
        calls = 0

        def learn(self, url: str, page: PageSketch | None, new_links: Sequence[str], soft_404: bool = False) -> None:
            super().learn(url, page, new_links, soft_404)
            Reloading.calls += 1
            if Reloading.calls % 7 == 0:
                saved.update(self.take_dirty())
                for name, data in saved.items():
                    self.load_host(name, data)

    resumed = simulate(web, [GAZETTE + "/", SHOP + "/items?page=1"], detector=Reloading(),
                       scope=Scope(allowed_hosts=["gazette.test", "shop.test"]))
    assert holder and resumed.fetched == straight.fetched and resumed.reasons == straight.reasons
    assert resumed.detector.traps() == straight.detector.traps() != []
    copy = TrapDetector.from_bytes(straight.detector.to_bytes())
    assert copy.to_bytes() == straight.detector.to_bytes() and copy.stats() == straight.detector.stats()
    assert copy.take_dirty() == {}
    copy.check(GAZETTE + "/cal/1999/01")
    copy.wants_sketch(GAZETTE + "/cal/1999/01")  # asking changes nothing
    assert copy.take_dirty() == {}
    assert straight.detector.host_state("never.test") == b""


def test_an_older_host_state_is_read_as_a_host_never_observed() -> None:
    """Versions 1 and 2 were the detector that dropped pages: their verdicts are not carried over."""
    for version in (1, 2):
        detector = TrapDetector()
        detector.load_host("gazette.test", bytes([version, 2]) + b"\x00" * 20)
        assert detector.needs_probe(GAZETTE + "/x") and detector.host_state("gazette.test") == b""


@pytest.mark.parametrize("damage", [lambda b: b[:-3], lambda b: b + b"\x00", lambda b: b"\x09" + b[1:],
                                    lambda b: b[:5]])
def test_corrupt_state_is_a_storage_error(damage: Callable[[bytes], bytes]) -> None:
    detector = trap_site_sim(TrapSpec(fanout_links=300, items=0), TrapDetector()).detector
    data = detector.host_state("gazette.test")
    TrapDetector().load_host("gazette.test", data)
    with pytest.raises(StorageError):
        TrapDetector().load_host("gazette.test", damage(data))
    with pytest.raises(StorageError):
        TrapDetector.from_bytes(damage(detector.to_bytes()))


def test_memory_per_host_is_bounded_and_suspects_outlive_other_patterns() -> None:
    detector = TrapDetector(max_patterns=16, soft_404=False)
    cal = [GAZETTE + p for p in months(60)]
    detector.learn(GAZETTE + "/", None, cal[:2])
    for i, url in enumerate(cal[:50]):  # each month links the next but one: the pattern grows
        detector.learn(url, sketch_at(SITE, url[len(GAZETTE):])[1] if detector.wants_sketch(url) else None,
                       [cal[i + 2]])
    assert detector.check(cal[-1]) == TRAP_PATTERN
    rng = random.Random(5)
    for i in range(2000):  # random paths, each its own pattern
        detector.learn(f"{GAZETTE}/{rng.choice(['wiki', 'topics'])}/{''.join(rng.choices('abcxyz', k=6))}",
                       sketch(prose(rng, 30)), [])
    assert detector.stats()["patterns"] == 16
    assert detector.check(cal[-1]) == TRAP_PATTERN
    assert len(detector.host_state("gazette.test")) < 16 * (48 + 16 + (WINDOW + 1) * 12 + REFERENCES * 12) + 16


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"min_pages": 1}, "min_pages"), ({"min_pages": True}, "min_pages"), ({"dup_share": 0}, "dup_share"),
    ({"dup_share": 1.5}, "dup_share"), ({"near_dup_bits": 65}, "near_dup_bits"),
    ({"near_dup_words": -1}, "near_dup_words"), ({"max_patterns": 0}, "max_patterns"),
    ({"soft_404": "yes"}, "soft_404"), ({"patterns": 1}, "patterns"),
])
def test_bad_arguments(kwargs: dict, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        TrapDetector(**kwargs)
    assert err.value.key == key



# --- the trap site, served for real ------------------------------------------------------------------

HREF = re.compile(r'href="([^"]*)"')


def hrefs(body: str) -> list[str]:
    return [h.replace("&amp;", "&") for h in HREF.findall(body)]


async def test_each_trap_behaves_as_described() -> None:
    async with TrapWeb(TrapSpec()) as web, aiohttp.ClientSession() as session:
        base, shop = web.base_urls

        async def get(url: str) -> tuple[int, str]:
            async with session.get(url) as resp:
                return resp.status, await resp.text()

        status, robots = await get(base + "/robots.txt")
        assert status == 200 and "Disallow:\n" in robots
        status, index = await get(web.seed)
        links = hrefs(index)
        assert status == 200 and [f"/page/{n}.html" for n in range(1, 11)] == [h for h in links if "/page/" in h][1:]
        for entry in ("/cal/2024/01", "/search?page=1&q=news", "/wiki/Main_Page", "/docs/", "/mirror/", "/links.html"):
            assert entry in links
        assert any(h.startswith("/account/home;jsessionid=") for h in links)
        # calendar: previous/next month and year, forever (to year 9999)
        status, page = await get(base + "/cal/2024/01")
        assert status == 200 and hrefs(page)[-4:] == ["/cal/2023/01", "/cal/2023/12", "/cal/2024/02", "/cal/2025/01"]
        assert hrefs((await get(base + "/cal/9999/12"))[1])[-2:] == ["/cal/9998/12", "/cal/9999/11"]
        # session ids: new on every link, the same on a refetch
        first = (await get(base + "/account/home;jsessionid=abc"))[1]
        again = (await get(base + "/account/home;jsessionid=abc"))[1]
        other = (await get(base + "/account/home;jsessionid=abd"))[1]
        ids = [h for h in hrefs(first) if h.startswith("/account/")][1:]
        assert re.fullmatch(r"/account/settings;jsessionid=[0-9a-f]{32}", ids[0])
        assert re.fullmatch(r"/account/help\?sid=[0-9a-f]{32}", ids[1])
        assert hrefs(first) == hrefs(again) and not set(ids) & set(hrefs(other))
        # search: the next page and two new searches
        links = hrefs((await get(base + "/search?q=kotaren&page=7"))[1])
        assert "/search?q=kotaren&page=8" in links and len([h for h in links if h.endswith("&page=1")]) == 2
        # soft 404: unknown paths answer 200 and link two more unknown paths, which answer 200 too
        status, page = await get(base + "/no/such/page")
        assert status == 200 and "could not be found" in page
        unknown = [h for h in hrefs(page) if h.startswith(("/wiki/", "/topics/")) and h != "/wiki/Main_Page"]
        assert len(unknown) == 2
        for path in unknown:
            assert (await get(base + path))[0] == 200
        # repeating relative segment and the mirror
        status, page = await get(base + "/docs/sub/sub/sub/sub/")
        assert status == 200 and 'href="sub/"' in page
        titles = {}
        for path in ("/mirror/", "/mirror/a/b/", "/mirror/a/b/a/b/", "/mirror/a/", "/mirror/a/b/a/"):
            status, page = await get(base + path)
            titles[path] = re.search(r"<h1>(.*)</h1>", page)[1]
        assert titles["/mirror/"] == titles["/mirror/a/b/"] == titles["/mirror/a/b/a/b/"] == "Mirror root"
        assert titles["/mirror/a/"] == titles["/mirror/a/b/a/"] == "Mirror a"
        assert 'href="a/"' in (await get(base + "/mirror/a/b/"))[1]
        # the huge page
        links = [h for h in hrefs((await get(base + "/links.html"))[1]) if h.startswith("/fan/")]
        assert len(links) == len(set(links)) == 200_000
        assert (await get(base + "/fan/199999"))[0] == 200
        assert "could not be found" in (await get(base + "/fan/200000"))[1]
        # the large site: its own host, real 404s
        status, page = await get(shop + "/items?page=40")
        assert status == 200 and [h for h in hrefs(page) if h.startswith("/item/")] == [
            f"/item/{n}" for n in range(1951, 2001)]
        assert (await get(shop + "/item/2001"))[0] == 404
        counts = web.snapshot()["counts"]
        assert counts[base + "/account/home;jsessionid=abc"] == 2
        assert counts[base + "/search?q=kotaren&page=7"] == 1
        kinds = web.requests_by_kind()
        assert kinds["calendar"] == 2 and kinds["session"] == 3 and kinds["mirror"] == 6 and kinds["items"] == 2
        assert kinds["robots"] == 1 and kinds["normal"] == 1 and kinds["relative"] == 1 and kinds["fanout"] == 3


def test_without_the_soft_404_trap_unknown_paths_are_404_and_the_site_is_deterministic() -> None:
    spec = TrapSpec(traps=("calendar",), items=0, crawl_delay=2.5)
    with TrapWeb.serve_in_thread(spec) as web:
        import urllib.error
        import urllib.request

        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(web.base_urls[0] + "/wiki/Main_Page", timeout=10)
        assert err.value.code == 404
        with urllib.request.urlopen(web.base_urls[0] + "/robots.txt", timeout=10) as resp:
            assert b"Crawl-delay: 2.5" in resp.read()
        assert web.items_seed == "" and len(web.base_urls) == 1 and web.item_urls() == []
        assert web.snapshot(reset=True)["total"] == 2 and web.snapshot()["total"] == 0
    assert classify("/cal/2024/01") == "calendar" and classify("/x", host=1) == "items"
    assert classify("/mirror/a/b/x.html") == "other" and classify("/page/3.html;jsessionid=1") == "normal"
    titles = {ITEMS.title(n) for n in range(1, 2001)}
    bodies = {reply_at(ITEMS, f"/item/{n}").body for n in range(1, 2001)}
    assert len(titles) > 1990 and len(bodies) == 2000
    with pytest.raises(ConfigError):
        TrapSpec(traps=("calendar", "lava"))


def test_the_command_line_entry() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "frontier.testing.traps", "--items", "10", "--traps", "search"],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        info = json.loads(proc.stdout.readline())
        with aiohttp_free_get(info["seed"]) as body:
            assert "/search?page=1&amp;q=news" in body and "/cal/" not in body
        stats = fetch_stats(info["stats_url"])
        assert stats["total"] == 1 and stats["by_kind"] == {"normal": 1}
        assert info["items_seed"].startswith("http://127.0.0.1:")
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
        proc.stdout.close()


class aiohttp_free_get:  # noqa: N801 - a tiny context manager for a blocking GET
    def __init__(self, url: str) -> None:
        import urllib.request

        self._resp = urllib.request.urlopen(url, timeout=10)

    def __enter__(self) -> str:
        return self._resp.read().decode()

    def __exit__(self, *exc: object) -> None:
        self._resp.close()


MAX_LINKS = 6_000  # the recommended limits.max_links_per_page


def test_the_worker_sketches_the_page_text_links_or_not() -> None:
    """extract_links(sketch_text=True): the sketch of workers.links.page_text, also for a page without links
    (a soft 404 or a calendar month may have none) or with meta nofollow; scripts and styles are not text."""
    text = prose(random.Random(5), 80)
    for meta, link in (("", ""), ("", '<a href="/x">more</a>'), ('<meta name="robots" content="nofollow">',
                                                            '<a href="/x">more</a>')):
        body = (f"<html><head><style>p {{}}</style>{meta}</head><body><script>var a;</script><p>{text}</p>{link}"
                "</body></html>")
        batch = extract_links(body.encode(), "http://h/", sketch_text=True)
        assert batch.sketch == sketch(f"{text} more" if link else text), (meta, link)
    assert extract_links(b"<p>words here</p>", "http://h/").sketch is None  # only when asked for


KILLED_AFTER_A_FAN_OUT = """
import os, signal, sys
from frontier.crawl.messages import FetchResult, Status
from frontier.crawl.scheduler import Frontier
from frontier.crawl.traps import FAN_OUT, TrapDetector
from frontier.config import PolitenessConfig
from frontier.url.scope import Scope
detector = TrapDetector(soft_404=False)
frontier = Frontier.open(sys.argv[1], scope=Scope(allowed_hosts=["a.test"]), traps=detector, clock=lambda: 1000.0,
                    politeness=PolitenessConfig(delay=0.0, obey_robots=False))
frontier.add_seeds(["http://a.test/"])
[job] = frontier.lease(1)
links = tuple(f"http://a.test/fan/{i}" for i in range(FAN_OUT + 10))
frontier.report([FetchResult(job=job, status=Status.OK, http_status=200, content_type="text/html", fetched_at=1000.0,
                             outlinks=links)])
sys.stdout.write(detector.to_bytes().hex())
sys.stdout.flush()
os.kill(os.getpid(), signal.SIGKILL)  # no close, no later commit
"""


def test_a_fan_out_is_stored_by_the_report_of_its_page(tmp_path: Path) -> None:
    """A fan-out is seen once (its page is not fetched again): the state that marks it is committed before
    `report` returns, not with the next batch, so a kill -9 right after cannot lose it (it did once in CI)."""
    data = tmp_path / "data"
    child = subprocess.run([sys.executable, "-c", KILLED_AFTER_A_FAN_OUT, str(data)], capture_output=True, text=True,
                           timeout=60, cwd=Path(__file__).resolve().parents[1])
    assert child.returncode == -9 and child.stdout, child.stderr
    learnt = bytes.fromhex(child.stdout)
    assert TrapDetector.from_bytes(learnt).stats()["hosts"] == 1
    reloaded = TrapDetector(soft_404=False)
    with Frontier.open(data, scope=Scope(allowed_hosts=["a.test"]), traps=reloaded):
        assert reloaded.to_bytes() == learnt
