"""Crawler-trap detection: URL patterns, near-duplicate page fingerprints, and a per-host detector.

    url_pattern("http://h/cal/2024/05?view=m&x=1")  -> "/cal/N/N?view&x"
    sketch(page_text)                               -> PageSketch(simhash, shingles), or None without words
    near_duplicate(a, b)                            -> True when two sketches are near-duplicates
    detector.check(url, depth)                      -> "trap_pattern" or None: queue this URL low?
    detector.admit(url)                             -> may a URL leased from the low band be fetched now?
    detector.wants_sketch(url)                      -> does the detector need this page's sketch?
    detector.observe(url, sketch, depth=, status=, outlinks=)  -> "soft_404" or None: queue its links low?
    detector.learn(url, depth, sketch, new_links)   -> after the commit: what the page added to the crawl

Pure Python (xxhash, no numpy: the worker processes compute the sketches and must start light), no I/O, so
the frontier process (or a Redis-backed one) owns the state and persists it in the same transaction as the
rest of the crawl (see "State" below).

Nothing here drops a page. A verdict only says "later": the caller queues a suspected URL in its host's low
band (frontier.state: `Link.low`), leased after every normal URL, and fetches it as long as its pattern's
budget (`max_suspect_pages`, per host and pattern) lasts; past it, while the pattern keeps growing, the caller
parks the URL for the run (Outcome.PARK). What is left is counted per host and pattern with its growth figures
and listed by `python -m frontier export --what suspected`; `traps.release` lets the next run fetch it.

URL patterns
  The path and query of a canonical URL with what varies between the pages of a template folded: each
  run of ASCII letters and digits in the path is "N" if all digits, "X" if it has a digit and 8 or more
  characters (hex ids, random tokens) or 24 or more characters of any kind, else its digit runs become
  "N" ("page12" -> "pageN"); a UUID is "X"; a path parameter keeps its name (";jsessionid=ab12" ->
  ";jsessionid"); the query keeps its parameter names only, folded the same way, de-duplicated and
  sorted ("?q=x&page=2" -> "?page&q"). The host is not part of it: the detector keys patterns by host.

Near-duplicate sketch: a 64-bit simhash (Charikar) and the number of shingles it was made of
  Features are the word 3-shingles of the text: lowercased, ASCII digits and punctuation dropped, split
  on whitespace; each shingle is the xxh3-64 of its three words joined by a space, and each distinct shingle
  counts once (a text of one or two words: each word is a feature). Digits are dropped on purpose:
  calendars, counters, "page N of M" differ in numbers only. About 30 us per KB of text; only the first
  MAX_WORDS (20,000) words count. `near_duplicate` asks two things: simhashes at most `max_bits` (16) apart
  and `difference` <= `max_words` (20), the estimated number of shingles (about words) each page has of
  its own: (n_a + n_b) / 2 - cos(pi * h / 64) * sqrt(n_a * n_b).

TrapDetector: a pattern is suspected when it keeps growing, and cleared when it converges
  A real site is finite: as the crawl covers a pattern, each fetched page of it yields fewer new URLs of it
  and its queue shrinks. A trap is not. Per (host, pattern) the detector counts the pages fetched, the URLs
  discovered (new to the crawl, found on any page), those found on the pattern's own pages (`own`) and the new
  URLs of other patterns its pages found (`elsewhere`), and keeps the three counts after each of its last
  WINDOW (16) pages. The pattern grows over the window when its own pages found at least one new URL of it for
  every two fetched and its queue did not shrink (at least WINDOW new URLs of it found, from anywhere); it
  feeds when its pages found at least one new URL elsewhere per page (a listing, not a calendar). `streak`
  counts the pages in a row whose window grew (negative: did not).
  - Suspected: a streak of WINDOW pages with evidence (its latest pages near-duplicates of most of its last
    REFERENCES (8) sketches, `alike` >= `min_pages` x `dup_share` - 1; or a fan), of PLAIN_STREAK (4) x WINDOW
    without; never while it feeds, never a released pattern (`release`).
  - Cleared: a suspected pattern whose window did not grow for WINDOW pages in a row, or that feeds, unless it
    is a fan of near-duplicates. Its URLs go back to the normal band (a low entry of a pattern not suspected is
    fetched when leased, unbudgeted).
  - A fan: one page linked FAN_OUT (2,000) new URLs of the pattern at once; it is suspected at once. (The
    caller also queues every link of a page with FAN_OUT links or more in the low band.)
  - Budget: `admit` counts each low-band fetch of a suspected pattern while it grows (or is a fan of
    near-duplicates) in `used`; once `used` reaches `max_suspect_pages` it answers False (park it). A pattern
    that converges spends nothing: its budget grows with it.
  - Soft 404s count under their host's pseudo-pattern SOFT_404_SPACE ("(soft 404)"), their new links as its
    own: every one has a new word in its path, so a pattern of its own; a low URL of a pattern with no verdict
    yet (fewer than WINDOW pages) spends the host's SOFT_404_SPACE budget when that is suspected (`budget_of`).
  Sketches are asked for (`wants_sketch`) only for the pages of a pattern that is suspected, a fan, or half a
  window into a streak without feeding, of a host whose probe answered 200, and for the probe: a site with no
  traps sketches little. A seed and a page linked from a seed (depth < 2) are never suspected, and never
  judged soft 404s.

  Soft 404s: per host, `probe_url(url)` is a path no site links to. When it answers 200 its answer is the
  host's first look-alike: its sketch AND its links. A later page (depth >= 2, not the host's root) is a
  soft 404 when it is a near-duplicate of a look-alike and its links differ from the look-alike's by at most
  SOFT_404_LINKS (4) URLs of the same shapes (`link_shape`: a "not found" page echoes the path asked for and
  links a few others, "/wiki/Foo" on one, "/wiki/Bar" on the next): a page in the host's template with
  links of its own (a list, a seed, an article's "read more" links) is not one. A soft 404's links are queued low.
  The first LOOK_ALIKES (8) soft 404s of a host are kept as look-alikes too.

Memory: per host at most `max_patterns` patterns, each about 350 bytes; when full, the least recently
observed pattern that is not suspected is dropped first.

State: `take_dirty()` returns {host: bytes} for every host changed since the last call; the caller writes
those bytes in the transaction that commits the same results, and `load_host(host, bytes)` restores them
on restart. `learn` runs after the commit of its page (it needs to know which links were new), so what it
learns rides with the next commit; `verdict_changed` says when that cannot wait: a pattern became or stopped
being suspected, or a fan-out was seen, and the caller then commits the state at once so a kill -9 cannot lose
it. The per-host records and their byte format are frontier.crawl.trap_state's (host record version 4; an
older version is read as a host never observed).
"""

from __future__ import annotations

import math
import re
import sys
from array import array
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import xxhash

from frontier.crawl.trap_state import (REFERENCES, STATE_VERSION, WINDOW, HostTraps, LookAlike, PageSketch,
                                       PatternGrowth, pack_hosts, unpack_hosts)
from frontier.errors import ConfigError

if TYPE_CHECKING:
    from frontier.config import CrawlConfig

__all__ = [
    "REFERENCES",
    "SOFT_404",
    "TRAP_BUDGET",
    "TRAP_PATTERN",
    "WINDOW",
    "LookAlike",
    "PageSketch",
    "TrapDetector",
    "difference",
    "hamming",
    "near_duplicate",
    "sketch",
    "suspected_counts",
    "suspected_rows",
    "url_pattern",
]

TRAP_PATTERN = "trap_pattern"
SOFT_404_SPACE = "(soft 404)"  # the pseudo-pattern of a host's soft 404s: their links' space grows as one
TRAP_BUDGET = "trap_budget"  # a low lease parked for the run: its pattern's budget is spent while it grows
SOFT_404 = "soft_404"

DEFAULT_MIN_PAGES = 8
DEFAULT_DUP_SHARE = 0.8
DEFAULT_NEAR_DUP_BITS = 16
DEFAULT_NEAR_DUP_WORDS = 20
DEFAULT_MAX_PATTERNS = 128
DEFAULT_MAX_SUSPECT_PAGES = 500
PLAIN_STREAK = 4  # windows of growth in a row that suspect a pattern without other evidence (alike pages, a fan)
SOFT_404_LINKS = 4  # links a soft 404 may have that its look-alike has not, and the other way round
FAN_OUT = 2000  # new URLs of one pattern from one page: a fan of it (a growth that needs no more pages)
MAX_LOOK_ALIKE_LINKS = 512  # a probe answer with more links is kept without them (nothing matches it)
SHINGLE = 3  # words per shingle
MAX_WORDS = 20_000  # words of a page sketched: about 120 KB of text, a few ms (a worker thread holds the GIL)
LOOK_ALIKES = 8  # soft-404 sketches kept per host
_PROBE_CHARS = 24  # hex digits of a probe path

# --- URL patterns --------------------------------------------------------------------------------

_UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
_RUN = re.compile(r"[0-9A-Za-z]+")
_DIGITS = re.compile(r"[0-9]+")
_PATH_PARAM = re.compile(r";([^/;=]*)=[^/;]*")


def _fold(m: re.Match[str]) -> str:
    run = m[0]
    if run.isdigit():
        return "N"
    has_digit = not run.isalpha()
    if len(run) >= 24 or (has_digit and len(run) >= 8):
        return "X"
    return _DIGITS.sub("N", run) if has_digit else run


def url_pattern(canonical_url: str) -> str:
    """The path and query of `canonical_url` with numbers, ids and random tokens folded (module docstring).

    Never raises; works on any "scheme://host/path?query" string (a missing path is "/")."""
    start = canonical_url.find("://")
    slash = canonical_url.find("/", start + 3 if start >= 0 else 0)
    rest = canonical_url[slash:] if slash >= 0 else "/"
    rest = rest.partition("#")[0]
    path, _, query = rest.partition("?")
    if ";" in path:
        path = _PATH_PARAM.sub(r";\1", path)
    path = _RUN.sub(_fold, _UUID.sub("X", path))
    if not query:
        return path
    names = {_RUN.sub(_fold, p.partition("=")[0]) for p in query.split("&") if p}
    return path + "?" + "&".join(sorted(names))


# --- the sketch ----------------------------------------------------------------------------------


def _token_table() -> bytes:
    table = bytearray(range(256))
    for b in range(128):
        c = chr(b)
        if c.isupper():
            table[b] = ord(c.lower())
        elif not c.isalpha():  # punctuation, controls, spaces, digits and "_"
            table[b] = 0x20
    return bytes(table)


_TOKENS = _token_table()
_NBSP = "\u00a0".encode()
_h64 = xxhash.xxh3_64_intdigest
_LITTLE = sys.byteorder == "little"


def sketch(text: str) -> PageSketch | None:
    """The simhash of the text's word 3-shingles and their number (module docstring); None without words."""
    data = text.encode("utf-8", "surrogatepass")
    if _NBSP in data:
        data = data.replace(_NBSP, b" ")
    words = data.translate(_TOKENS).split(maxsplit=MAX_WORDS)[:MAX_WORDS]
    n = len(words)
    if n == 0:
        return None
    if n >= SHINGLE:
        features = array("Q", set(map(_h64, map(b" ".join, zip(words, words[1:], words[2:])))))
    else:
        features = array("Q", set(map(_h64, words)))
    if not _LITTLE:
        features.byteswap()
    raw, m = features.tobytes(), len(features)
    # bit 8j+t of the simhash: is bit t of byte lane j set in more than half of the features? One big-int
    # AND and popcount per bit over the lane's m bytes (pure C work; no numpy in the worker processes)
    masks = [int.from_bytes(bytes((1 << t,)) * m, "little") for t in range(8)]
    value = 0
    for j in range(8):
        lane = int.from_bytes(raw[j::8], "little")
        for t, mask in enumerate(masks):
            if 2 * (lane & mask).bit_count() > m:
                value |= 1 << (8 * j + t)
    return PageSketch(value, m)


def hamming(a: int, b: int) -> int:
    """Bits that differ between two simhashes."""
    return (a ^ b).bit_count()


def difference(a: PageSketch, b: PageSketch) -> float:
    """Estimated shingles (about words) each page has that the other lacks: (n_a + n_b) / 2 minus the
    estimated shared part, cos(pi * hamming / 64) * sqrt(n_a * n_b). 0 for identical pages."""
    shared = math.cos(math.pi * hamming(a.simhash, b.simhash) / 64) * math.sqrt(a.shingles * b.shingles)
    return max(0.0, (a.shingles + b.shingles) / 2 - shared)


def near_duplicate(a: PageSketch, b: PageSketch, *, max_bits: int = DEFAULT_NEAR_DUP_BITS,
                   max_words: int = DEFAULT_NEAR_DUP_WORDS) -> bool:
    """True when the pages share most of their text (simhashes at most `max_bits` apart) and differ by
    at most about `max_words` words (`difference`)."""
    return hamming(a.simhash, b.simhash) <= max_bits and difference(a, b) <= max_words


# --- the detector ---


def link_shape(url: str) -> str:
    """A link with every run of letters and digits of its path and query folded to "X" ("/wiki/Foo" and
    "/wiki/Bar2" are "/X/X"): what a "not found" page's echoed links have in common from page to page."""
    origin = _origin(url)[0]
    return origin + _RUN.sub("X", url_pattern(url))


def link_hashes(outlinks: Iterable[str]) -> dict[int, int]:
    """{stable 64-bit hash of an outlink: hash of its shape}, what a look-alike keeps of a page's links."""
    return {_h64(url.encode("utf-8", "surrogatepass")): _h64(link_shape(url).encode("utf-8", "surrogatepass"))
            for url in outlinks}


def _links_match(a: dict[int, int], b: dict[int, int]) -> bool:
    """At most SOFT_404_LINKS links differ, and those of each side have the same shapes (the echoed links of
    two "not found" pages; not an article's links to other articles)."""
    only_a = [shape for h, shape in a.items() if h not in b]
    only_b = [shape for h, shape in b.items() if h not in a]
    return len(only_a) + len(only_b) <= SOFT_404_LINKS and sorted(only_a) == sorted(only_b)


class TrapDetector:
    """Suspects (host, URL pattern) pairs that keep producing new near-duplicate pages and nothing else, and
    soft-404 pages; see the module docstring. Its verdicts queue URLs low, never drop them. Constructor
    arguments are plain values; `from_config` reads `cfg.traps`.

    `patterns` and `soft_404` turn the two defences on or off; `near_dup_bits` and `near_dup_words`
    define a near-duplicate for both (`near_duplicate`)."""

    def __init__(self, *, patterns: bool = True, min_pages: int = DEFAULT_MIN_PAGES,
                 dup_share: float = DEFAULT_DUP_SHARE, near_dup_bits: int = DEFAULT_NEAR_DUP_BITS,
                 near_dup_words: int = DEFAULT_NEAR_DUP_WORDS, soft_404: bool = True,
                 max_patterns: int = DEFAULT_MAX_PATTERNS, max_suspect_pages: int | None = DEFAULT_MAX_SUSPECT_PAGES,
                 release: Iterable[str] = ()) -> None:
        """`max_suspect_pages`: the budget of each suspected (host, pattern) while it grows (None: no limit).
        `release`: patterns never suspected, each "PATTERN" (every host) or "HOST PATTERN"."""
        _check_options(patterns=patterns, min_pages=min_pages, dup_share=dup_share, near_dup_bits=near_dup_bits,
                       near_dup_words=near_dup_words, soft_404=soft_404, max_patterns=max_patterns,
                       max_suspect_pages=max_suspect_pages)
        self.patterns = patterns
        self.min_pages = min_pages
        self.dup_share = float(dup_share)
        self.near_dup_bits = near_dup_bits
        self.near_dup_words = near_dup_words
        self.soft_404 = soft_404
        self.max_patterns = max_patterns
        self.max_suspect_pages = max_suspect_pages
        self._released = {_release_key(entry) for entry in release}
        self._alike_needed = max(1, math.ceil(self.dup_share * min_pages - 1e-9) - 1)  # verdicts: pages - 1
        self._hosts: dict[str, HostTraps] = {}
        self._dirty: set[str] = set()
        self.verdict_changed = False  # since the last take_dirty: a suspicion or a fan-out, see the docstring

    @classmethod
    def from_config(cls, cfg: CrawlConfig) -> TrapDetector:
        """The detector of a crawl, from the `traps` section of its config."""
        t = cfg.traps  # type: ignore[attr-defined]
        return cls(patterns=t.patterns, min_pages=t.min_pages, dup_share=t.dup_share,
                   near_dup_bits=t.near_dup_bits, near_dup_words=t.near_dup_words, soft_404=t.soft_404,
                   max_patterns=t.max_patterns_per_host, max_suspect_pages=t.max_suspect_pages, release=t.release)

    def _near(self, a: PageSketch, b: PageSketch) -> bool:
        return near_duplicate(a, b, max_bits=self.near_dup_bits, max_words=self.near_dup_words)

    # -- the questions ------------------------------------------------------------------------------

    def check(self, url: str, depth: int = 2) -> str | None:
        """"trap_pattern" when the URL's pattern on its host is suspected and the URL is not a seed's or a
        seed's link (depth < 2): queue it low. Changes nothing; a dict lookup for hosts without suspects."""
        if depth < 2:
            return None
        host = self._hosts.get(_origin(url)[1])
        if host is None or not host.suspects:
            return None
        pattern = host.patterns.get(url_pattern(url))
        return TRAP_PATTERN if pattern is not None and pattern.suspect else None

    def admit(self, url: str) -> bool:
        """May a URL leased from its host's low band be fetched now? False while its pattern is suspected, its
        budget (`max_suspect_pages`) spent and it still grows (or is a fan of near-duplicates): the caller parks
        it for this run. A fetch of a suspected pattern that grows is counted against its budget."""
        name = _origin(url)[1]
        host = self._hosts.get(name)
        if host is None or not host.suspects:
            return True
        pattern = host.patterns.get(self.budget_of(name, url_pattern(url)))
        if pattern is None or not pattern.suspect or not self._spending(pattern):
            return True
        budget = self.max_suspect_pages
        if budget is not None and pattern.used >= budget:
            return False
        pattern.used += 1
        pattern.raw = None
        self._dirty.add(_origin(url)[1])
        return True

    def budget_of(self, host: str, key: str) -> str:
        """The pattern whose budget a low-band URL of pattern `key` spends: its own, or, while it has no verdict of
        its own (fewer than WINDOW pages fetched, not suspected), its host's SOFT_404_SPACE when that is suspected
        (a soft 404's links: a new word in every path, so a new pattern each)."""
        known = self._hosts.get(host)
        if known is None:
            return key
        pattern = known.patterns.get(key)
        if pattern is None or (not pattern.suspect and pattern.pages < WINDOW):
            space = known.patterns.get(SOFT_404_SPACE)
            if space is not None and space.suspect:
                return SOFT_404_SPACE
        return key

    def _spending(self, pattern: PatternGrowth) -> bool:
        """Does a fetch of this suspected pattern count against its budget? While it grows, and for a fan of
        near-duplicates; not while it converges (its budget grows with it)."""
        return pattern.streak > 0 or (pattern.fan and pattern.alike >= self._alike_needed)

    def wants_sketch(self, url: str) -> bool:
        """True when the page's sketch can change a verdict: its host's probe, a page of a host whose probe
        answered 200, a page of a watched pattern. False for almost every page of a site without traps."""
        host = self._hosts.get(_origin(url)[1])
        if host is None:
            return self.soft_404 and self.is_probe(url)
        if self.soft_404 and (host.probe == 2 or (host.probe == 0 and self.is_probe(url))):
            return True
        if not host.watched:
            return False
        pattern = host.patterns.get(url_pattern(url))
        return pattern is not None and pattern.watched()

    def probe_url(self, url: str) -> str:
        """The soft-404 probe of the URL's host: "scheme://host/<24 hex digits>", a path nothing links to,
        the same in every process and run."""
        origin = _origin(url)[0]
        token = xxhash.xxh3_128_hexdigest(b"frontier soft-404 probe " + origin.encode())[:_PROBE_CHARS]
        return f"{origin}/{token}"

    def is_probe(self, url: str) -> bool:
        """True when `url` is its host's soft-404 probe (`probe_url`)."""
        return len(url) == len(_origin(url)[0]) + 1 + _PROBE_CHARS and url == self.probe_url(url)

    def needs_probe(self, url: str) -> bool:
        """True while soft-404 detection is on and the URL's host has no probe answer yet."""
        host = self._hosts.get(_origin(url)[1])
        return self.soft_404 and (host is None or host.probe == 0)

    def observe(self, url: str, page: PageSketch | None, *, status: int = 200, depth: int = 2,
                outlinks: Sequence[str] = ()) -> str | None:
        """Judge one fetched page before its links are taken: "soft_404" when it matches a look-alike of its
        host, text and links (queue its links low), else None. The probe's answer becomes the host's first
        look-alike when it is a 200 (and is itself "soft_404")."""
        origin, name = _origin(url)
        if self.soft_404 and self.is_probe(url):
            host = self._host(name)
            if status == 200 and page is not None:
                links = link_hashes(outlinks) if len(outlinks) <= MAX_LOOK_ALIKE_LINKS else {0: 0}
                host.probe, host.look_alikes, host.head = 2, [LookAlike(page, links)], None
                return SOFT_404
            host.probe, host.look_alikes, host.head = 1, [], None
            return None
        if not self.soft_404 or status != 200 or page is None or depth < 2 or len(url) <= len(origin) + 1:
            return None  # the host's root never is one
        host = self._hosts.get(name)
        if host is None or host.probe != 2 or len(outlinks) > MAX_LOOK_ALIKE_LINKS + SOFT_404_LINKS:
            return None
        links = None
        for look in host.look_alikes:
            if abs(len(look.links) - len(outlinks)) > SOFT_404_LINKS or not self._near(page, look.page):
                continue
            links = link_hashes(outlinks) if links is None else links
            if _links_match(links, look.links):
                self._dirty.add(name)
                if len(host.look_alikes) < LOOK_ALIKES:
                    host.look_alikes.append(LookAlike(page, links))
                    host.head = None
                return SOFT_404
        return None

    def learn(self, url: str, page: PageSketch | None, new_links: Sequence[str], soft_404: bool = False) -> None:
        """After the commit of a fetched 200 page: `new_links` are its outlinks that were new to the crawl.
        Counts them as discovered under their own host and pattern, and judges the page's pattern by its growth
        over the window (module docstring): suspected when it keeps growing, cleared when it converges. A soft
        404 (`soft_404`) counts under its host's SOFT_404_SPACE instead of its own pattern, with its new links."""
        if not self.patterns:
            return
        name = _origin(url)[1]
        here = SOFT_404_SPACE if soft_404 else url_pattern(url)
        host = self._host(name)
        pattern = host.pattern(here, self.max_patterns, self._is_released(name, here))
        own = elsewhere = 0
        fans: dict[int, int] = {}
        for link in new_links:
            link_name = _origin(link)[1]
            key = url_pattern(link)
            if link_name == name and (key == here or soft_404):
                own += 1
                other, other_host = pattern, host
            else:
                elsewhere += 1
                other_host = host if link_name == name else self._host(link_name)
                other = other_host.pattern(key, self.max_patterns, self._is_released(link_name, key), touch=False)
            other.discovered += 1
            other.raw = None
            n = fans[id(other)] = fans.get(id(other), 0) + 1
            if n == FAN_OUT and not other.fan:
                before = other.watched()
                other.fan = self.verdict_changed = True
                other_host.watch(before, other)
                if not other.released:
                    self._suspect(other_host, other, True)
        before = pattern.watched()
        pattern.add_page(own, elsewhere)
        if page is not None:
            refs = pattern.refs
            pattern.add_reference(page, bool(refs) and 2 * sum(self._near(page, ref) for ref in refs) > len(refs))
        if pattern.growing():
            pattern.streak = max(pattern.streak, 0) + 1 if pattern.streak < 32767 else 32767
        else:
            pattern.streak = min(pattern.streak, 0) - 1 if pattern.streak > -32768 else -32768
        alike_fan = pattern.fan and pattern.alike >= self._alike_needed
        if not pattern.suspect:
            need = WINDOW if pattern.fan or pattern.alike >= self._alike_needed else PLAIN_STREAK * WINDOW
            if pattern.streak >= need and not pattern.released and not pattern.feeds():
                self._suspect(host, pattern, True)
        elif (pattern.streak <= -WINDOW or pattern.feeds()) and not alike_fan:
            self._suspect(host, pattern, False)  # it converges, or finds content: back to the normal band
        host.watch(before, pattern)

    def _suspect(self, host: HostTraps, pattern: PatternGrowth, suspect: bool) -> None:
        if host.suspect(pattern, suspect):
            self.verdict_changed = True

    def _host(self, name: str) -> HostTraps:
        host = self._hosts.get(name)
        if host is None:
            host = self._hosts[name] = HostTraps()
        self._dirty.add(name)
        return host

    def _is_released(self, name: str, key: str) -> bool:
        return bool(self._released) and ((name, key) in self._released or ("", key) in self._released)

    # -- what it knows --------------------------------------------------------------------------------

    def traps(self) -> list[tuple[str, str, int]]:
        """(host, pattern, pages observed) of every suspected pattern."""
        return [(name, key, p.pages) for name, host in self._hosts.items() for key, p in host.patterns.items()
                if p.suspect]

    def growth(self, host: str, pattern: str) -> dict[str, object] | None:
        """The growth figures of a (host, pattern) the detector knows: pages fetched, new URLs of it per page
        over the window, URLs of it discovered and not fetched, budget spent, suspected; None if unknown."""
        known = self._hosts.get(host)
        p = None if known is None else known.patterns.get(pattern)
        return None if p is None else p.figures()

    def stats(self) -> dict[str, int]:
        """Counts for a summary: hosts, patterns, suspected patterns, hosts with a soft-404 look-alike."""
        hosts = self._hosts.values()
        return {"hosts": len(self._hosts), "patterns": sum(len(h.patterns) for h in hosts),
                "trap_patterns": sum(h.suspects for h in hosts), "soft_404_hosts": sum(h.probe == 2 for h in hosts)}

    # -- state ---------------------------------------------------------------------------------------

    def take_dirty(self) -> dict[str, bytes]:
        """{host: state bytes} of every host changed since the last call; write them with the same commit."""
        out = {name: self.host_state(name) for name in self._dirty}
        self._dirty.clear()
        self.verdict_changed = False
        return out

    def host_state(self, name: str) -> bytes:
        """One host's state as bytes (`HostTraps.pack`); b"" for a host never observed."""
        host = self._hosts.get(name)
        return b"" if host is None else host.pack()

    def load_host(self, name: str, data: bytes) -> None:
        """Restore one host's state from `host_state` bytes (b"" or an older version forgets the host).
        StorageError if corrupt. A released pattern (`release`) loads cleared."""
        self._dirty.discard(name)
        if not data or data[0] < STATE_VERSION:
            self._hosts.pop(name, None)
            return
        host = self._hosts[name] = HostTraps.unpack(data, name)
        if self._released:
            for key, pattern in host.patterns.items():
                if self._is_released(name, key):
                    self._clear(name, host, pattern)

    def release(self, host: str, pattern: str) -> bool:
        """Never suspect `pattern` ("/..." as `traps` names it) of `host` ("": of every host) again, from now on
        (an operator's order while the crawl runs; `release` at construction is the config's). True if a
        suspected pattern was cleared. Its URLs parked already in this run are fetched by the next run."""
        self._released.add((host, pattern))
        cleared = False
        for name, known in self._hosts.items():
            found = known.patterns.get(pattern)
            if found is not None and not found.released and host in ("", name):
                cleared |= self._clear(name, known, found)
        return cleared

    def _clear(self, name: str, host: HostTraps, pattern: PatternGrowth) -> bool:
        """Mark a pattern released, its suspicion lifted; True if it was suspected."""
        before = pattern.watched()
        pattern.released = True
        was = pattern.suspect
        if was:
            self._suspect(host, pattern, False)
            self._dirty.add(name)
        host.watch(before, pattern)
        return was

    def to_bytes(self) -> bytes:
        """Every host's state in one blob (frontier.crawl.trap_state.pack_hosts)."""
        return pack_hosts({name: self.host_state(name) for name in self._hosts})

    @classmethod
    def from_bytes(cls, data: bytes, **kwargs: object) -> TrapDetector:
        """A detector built with `kwargs` holding the state of `to_bytes`. StorageError if corrupt."""
        detector = cls(**kwargs)  # type: ignore[arg-type]
        for name, state in unpack_hosts(data):
            detector.load_host(name, state)
        return detector


def _check_options(*, patterns: bool, min_pages: int, dup_share: float, near_dup_bits: int, near_dup_words: int,
                   soft_404: bool, max_patterns: int, max_suspect_pages: int | None) -> None:
    """ConfigError, naming the key, for a TrapDetector option out of its range."""
    for key, value, low, high in (("min_pages", min_pages, 2, 1_000_000), ("near_dup_bits", near_dup_bits, 0, 64),
                                  ("near_dup_words", near_dup_words, 0, 1_000_000),
                                  ("max_patterns", max_patterns, 1, 65535)):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigError(f"expected an integer in [{low}, {high}], got {value!r}", key=key)
    if isinstance(dup_share, bool) or not isinstance(dup_share, (int, float)) or not 0 < dup_share <= 1:
        raise ConfigError(f"expected a number in (0, 1], got {dup_share!r}", key="dup_share")
    for key, value in (("patterns", patterns), ("soft_404", soft_404)):
        if not isinstance(value, bool):
            raise ConfigError(f"expected true or false, got {value!r}", key=key)
    if max_suspect_pages is not None and (isinstance(max_suspect_pages, bool) or not isinstance(
            max_suspect_pages, int) or max_suspect_pages < 0):
        raise ConfigError(f"expected null or an integer >= 0, got {max_suspect_pages!r}", key="max_suspect_pages")


def _release_key(entry: str) -> tuple[str, str]:
    """("host" or "", pattern) of a traps.release entry: "PATTERN" or "HOST PATTERN"."""
    if not isinstance(entry, str) or not entry.strip():
        raise ConfigError(f"expected \"PATTERN\" or \"HOST PATTERN\", got {entry!r}", key="release")
    host, _, pattern = entry.strip().rpartition(" ")
    if not pattern.startswith("/"):
        raise ConfigError(f"a pattern starts with \"/\" (as the summary prints it), got {entry!r}", key="release")
    return host.strip(), pattern


def suspected_counts(pairs: Iterable[tuple[str, str]],
                     bucket: Callable[[str, str], str] | None = None) -> list[dict[str, object]]:
    """[{"host", "pattern", "urls"}] of (host, URL) pairs of low-queue entries, the most URLs first; `bucket`
    (host, pattern) -> the pattern to count it under (`TrapDetector.budget_of`)."""
    counts: dict[tuple[str, str], int] = {}
    for host, url in pairs:
        pattern = url_pattern(url)
        key = (host, pattern if bucket is None else bucket(host, pattern))
        counts[key] = counts.get(key, 0) + 1
    return [{"host": host, "pattern": pattern, "urls": n} for (host, pattern), n in
            sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def suspected_rows(pairs: Iterable[tuple[str, str]], detector: TrapDetector | None) -> list[dict[str, object]]:
    """`suspected_counts` of (host, URL) pairs of low-queue entries, each pattern's row with the `detector`'s growth
    figures where it knows the pattern (the budget spent, traps.max_suspect_pages, while it kept growing)."""
    if detector is None:
        return suspected_counts(pairs)
    rows = suspected_counts(pairs, detector.budget_of)
    for row in rows:
        figures = detector.growth(str(row["host"]), str(row["pattern"]))
        if figures is not None:
            row.update(figures)
    return rows


def _origin(url: str) -> tuple[str, str]:
    """("scheme://host[:port]", "host[:port]") of a canonical URL."""
    start = url.find("://") + 3
    end = url.find("/", start)
    if end < 0:
        return url, url[start:]
    return url[:end], url[start:end]
