"""Crawler-trap detection: URL patterns, near-duplicate page fingerprints, and a per-host detector.

    url_pattern("http://h/cal/2024/05?view=m&x=1")  -> "/cal/N/N?view&x"
    sketch(page_text)                               -> PageSketch(simhash, shingles), or None without words
    near_duplicate(a, b)                            -> True when two sketches are near-duplicates
    detector.check(url)                             -> "trap_pattern" or None: may this URL be enqueued?
    detector.observe(url, sketch, status=200)       -> "soft_404" or None: follow this page's links?

Pure Python (xxhash, no numpy: the worker processes compute the sketches and must start light), no I/O, so
the frontier process (or a Redis-backed one) owns the state and persists it in the same transaction as the
rest of the crawl (see "State" below).

URL patterns
  The path and query of a canonical URL with what varies between the pages of a template folded: each
  run of ASCII letters and digits in the path is "N" if all digits, "X" if it has a digit and 8 or more
  characters (hex ids, random tokens) or 24 or more characters of any kind, else its digit runs become
  "N" ("page12" -> "pageN"); a UUID is "X"; a path parameter keeps its name (";jsessionid=ab12" ->
  ";jsessionid"); the query keeps its parameter names only, folded the same way, de-duplicated and
  sorted ("?q=x&page=2" -> "?page&q"). The host is not part of it: the detector keys patterns by host.

Near-duplicate sketch: a 64-bit simhash (Charikar) and the number of shingles it was made of
  Features are the word 3-shingles of the text: lowercased, ASCII digits and punctuation dropped, split
  on whitespace (non-ASCII bytes stay inside words, so any script works where words are separated by
  spaces); each shingle is the xxh3-64 of its three words joined by a space, and each distinct shingle
  counts once (a text of one or two words: each word is a feature). Weighted by their counts, a
  repeated shingle (a list of 20 links all reading "link", a menu) outvotes the page's own text in
  every bit: 120 random words of their own were 5 to 9 bits apart under 20 "link"s, and `difference`,
  an estimate over sets, said 6 to 13 words. Digits are dropped on purpose: calendars, counters,
  "page N of M" and "entry N" differ in numbers only; the cost is that pages differing only in numbers
  are near-duplicates too. C-level work per shingle and one big-int AND + popcount per simhash bit: about
  30 us per KB of text, 0.1-0.3 ms for a typical page (tests/test_traps.py measures it). Only the first
  MAX_WORDS (20,000) words count, so a 10 MB page costs a few ms, not a second of a worker's GIL (pages
  alike in their first 20,000 words are near-duplicates).
  The Hamming distance h of two simhashes estimates the angle between the pages' shingle vectors
  (pi * h / 64), a relative measure: with a large shared template (navigation, footer) distinct pages
  are close too. So `near_duplicate` asks two things: h <= `max_bits` (16: the pages share most of
  their text) and `difference` <= `max_words` (20), the estimated number of shingles, about words, each
  page has of its own: (n_a + n_b) / 2 - cos(pi * h / 64) * sqrt(n_a * n_b). Two pages are
  near-duplicates when they share most of their text and differ by fewer than about 20 words, whatever
  the size of the template. Measured on the trap site's pages (frontier.testing.traps): pages of one
  trap pattern differ by a median of 0 to 5 (90th percentile at most 11); distinct articles and items
  by 110 to 200 (10th percentile 74 and up); pages of 20 own words in a 1,000-word template by 30.

TrapDetector
  Per (host, pattern) it keeps the sketches of the last REFERENCES (8) pages and the verdicts of the last
  WINDOW (16). A fetched page is a near-duplicate when it is one of more than half of those references
  (not of any one: one look-alike among eight is chance, most of them is a template; a pattern whose
  pages alternate between a template and real content is not a trap). Once a pattern has `min_pages` (8)
  pages and at least `dup_share` (80%) of its last min(pages - 1, 16) verdicts are near-duplicates, the
  pattern is a trap: `check` refuses its URLs ("trap_pattern") for the rest of the crawl. A site of many
  distinct pages under one pattern (/item/N) has few near-duplicates, so it is never marked.

  Soft 404s: per host, `probe_url(url)` is a path no site links to. Its answer, fed back through
  `observe` like any page, is the host's "not found" page when it is a 200; a later page that is a
  near-duplicate of it is a soft 404 ("soft_404": do not follow its links). The probe's own answer is
  one. The first LOOK_ALIKES (8) soft 404s of a host are kept as look-alikes too, and a page is a soft 404
  when it is a near-duplicate of any of them: a "not found" page echoes the path asked for and links
  others, so soft 404s differ from the probe's answer by about as much as the 20-word bound, and for some
  probe paths about half of them passed as real pages against the probe's answer alone (the trap site's
  soft-404 trap then grew without bound on 15 of 200 hosts, simulated; with the look-alikes on none, and
  no article was taken for a soft 404). A host whose probe answered anything else (a real 404) has no soft 404s. The host's root "/" is
  never one (some sites answer unknown paths with their home page). Pages fetched before the probe's
  answer arrives are not judged, so the probe should be the host's first request after robots.txt.

Memory: per host at most `max_patterns` patterns, each about 300 bytes (its text, 8 sketches, two
counters); when full, the least recently observed pattern that is not a trap is dropped (a trap is dropped
only when every pattern is one), so a host of random paths costs at most about 32 KB with the default 128.

State: `take_dirty()` returns {host: bytes} for every host changed since the last call; the caller writes
those bytes in the transaction that commits the same results, and `load_host(host, bytes)` restores them
on restart (a crash loses the detector's view of exactly the results it loses, which are refetched).
`to_bytes()` / `from_bytes()` do the whole detector at once. Host record layout (little-endian):

    u8  version (2)         u8 probe (0 not answered, 1 answered without a look-alike, 2 look-alikes)
    u8  n, n x (u64 simhash, u32 shingles) of the look-alikes, the probe's answer first
    u16 pattern count, then per pattern, least recently observed first:
        u16 length + UTF-8 pattern, u32 pages, u16 window (bit 0 = latest verdict), u8 flags (1 = trap),
        u8 n, n x (u64 simhash, u32 shingles) of the reference pages, oldest first
Version 1 (one look-alike: u64 simhash, u32 shingles in place of n and the list) is read too.
"""

from __future__ import annotations

import math
import re
import struct
import sys
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import xxhash

from frontier.errors import ConfigError, StorageError

if TYPE_CHECKING:
    from frontier.config import CrawlConfig

__all__ = [
    "SOFT_404",
    "TRAP_PATTERN",
    "PageSketch",
    "TrapDetector",
    "difference",
    "hamming",
    "near_duplicate",
    "sketch",
    "url_pattern",
]

TRAP_PATTERN = "trap_pattern"
SOFT_404 = "soft_404"

DEFAULT_MIN_PAGES = 8
DEFAULT_DUP_SHARE = 0.8
DEFAULT_NEAR_DUP_BITS = 16
DEFAULT_NEAR_DUP_WORDS = 20
DEFAULT_MAX_PATTERNS = 128
REFERENCES = 8  # sketches kept per pattern
WINDOW = 16  # verdicts kept per pattern
SHINGLE = 3  # words per shingle
MAX_WORDS = 20_000  # words of a page sketched: about 120 KB of text, a few ms (a worker thread holds the GIL)
LOOK_ALIKES = 8  # soft-404 sketches kept per host
STATE_VERSION = 2  # 1: one look-alike per host
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


class PageSketch(NamedTuple):
    """What a page's text looks like: its 64-bit simhash and the number of shingles behind it."""

    simhash: int
    shingles: int


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


# --- the detector ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Pattern:
    pages: int = 0
    window: int = 0  # bit 0 is the latest verdict, 1 = near-duplicate
    trap: bool = False
    refs: list[PageSketch] = field(default_factory=list)  # oldest first, at most REFERENCES


@dataclass(slots=True)
class _Host:
    probe: int = 0  # 0 not answered, 1 answered without a look-alike, 2 look-alikes known
    look_alikes: list[PageSketch] = field(default_factory=list)  # the probe's answer first, at most LOOK_ALIKES
    patterns: dict[str, _Pattern] = field(default_factory=dict)  # least recently observed first
    traps: int = 0


_HEAD = struct.Struct("<BBB")  # version, probe, look-alikes
_HEAD_V1 = struct.Struct("<BBQIH")
_PAT = struct.Struct("<IHBB")
_REF = struct.Struct("<QI")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")


class TrapDetector:
    """Marks (host, URL pattern) pairs whose pages are near-duplicates, and soft-404 pages; see the module
    docstring. Constructor arguments are plain values; `from_config` reads `cfg.traps`.

    `patterns` and `soft_404` turn the two defences on or off; `near_dup_bits` and `near_dup_words`
    define a near-duplicate for both (`near_duplicate`)."""

    def __init__(self, *, patterns: bool = True, min_pages: int = DEFAULT_MIN_PAGES,
                 dup_share: float = DEFAULT_DUP_SHARE, near_dup_bits: int = DEFAULT_NEAR_DUP_BITS,
                 near_dup_words: int = DEFAULT_NEAR_DUP_WORDS, soft_404: bool = True,
                 max_patterns: int = DEFAULT_MAX_PATTERNS) -> None:
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
        self.patterns = patterns
        self.min_pages = min_pages
        self.dup_share = float(dup_share)
        self.near_dup_bits = near_dup_bits
        self.near_dup_words = near_dup_words
        self.soft_404 = soft_404
        self.max_patterns = max_patterns
        self._hosts: dict[str, _Host] = {}
        self._dirty: set[str] = set()

    @classmethod
    def from_config(cls, cfg: CrawlConfig) -> TrapDetector:
        """The detector of a crawl, from the `traps` section of its config."""
        t = cfg.traps  # type: ignore[attr-defined]
        return cls(patterns=t.patterns, min_pages=t.min_pages, dup_share=t.dup_share,
                   near_dup_bits=t.near_dup_bits, near_dup_words=t.near_dup_words, soft_404=t.soft_404,
                   max_patterns=t.max_patterns_per_host)

    def _near(self, a: PageSketch, b: PageSketch) -> bool:
        return near_duplicate(a, b, max_bits=self.near_dup_bits, max_words=self.near_dup_words)

    # -- the questions ------------------------------------------------------------------------------

    def check(self, url: str) -> str | None:
        """"trap_pattern" when the URL's pattern on its host is a trap, else None. Changes nothing; costs a
        dict lookup for hosts without traps."""
        host = self._hosts.get(_origin(url)[1])
        if host is None or not host.traps:
            return None
        pattern = host.patterns.get(url_pattern(url))
        return TRAP_PATTERN if pattern is not None and pattern.trap else None

    def check_many(self, urls: Iterable[str]) -> list[str | None]:
        """`check` of each URL, in order."""
        check = self.check
        return [check(url) for url in urls]

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

    def observe(self, url: str, page: PageSketch | None, *, status: int = 200) -> str | None:
        """Learn from one fetched page (its HTTP status and the `sketch` of its text); returns "soft_404"
        when its links should not be followed, else None.

        Call it for every page result with an HTTP response: only 200s with a sketch teach the pattern
        statistics; the probe's answer teaches the host's look-alike whatever its status."""
        origin, name = _origin(url)
        if self.soft_404 and self.is_probe(url):
            host = self._host(name)
            if status == 200 and page is not None:
                host.probe, host.look_alikes = 2, [page]
                return SOFT_404
            host.probe, host.look_alikes = 1, []
            return None
        if status != 200 or page is None:
            return None
        host = self._host(name)
        if self.patterns:
            self._learn(host, url_pattern(url), page)
        if self.soft_404 and host.probe == 2 and len(url) > len(origin) + 1 \
                and any(self._near(page, look) for look in host.look_alikes):  # the host's root never is one
            if len(host.look_alikes) < LOOK_ALIKES:
                host.look_alikes.append(page)
            return SOFT_404
        return None

    def _host(self, name: str) -> _Host:
        host = self._hosts.get(name)
        if host is None:
            host = self._hosts[name] = _Host()
        self._dirty.add(name)
        return host

    def _learn(self, host: _Host, key: str, page: PageSketch) -> None:
        patterns = host.patterns
        pattern = patterns.pop(key, None)
        if pattern is None:
            if len(patterns) >= self.max_patterns:
                self._evict(host)
            pattern = _Pattern()
        patterns[key] = pattern  # most recently observed last
        refs = pattern.refs
        if refs:
            dups = sum(self._near(page, ref) for ref in refs)
            pattern.window = ((pattern.window << 1) | (2 * dups > len(refs))) & ((1 << WINDOW) - 1)
        pattern.pages += 1
        refs.append(page)
        if len(refs) > REFERENCES:
            del refs[0]
        if not pattern.trap and pattern.pages >= self.min_pages:
            verdicts = min(pattern.pages - 1, WINDOW)
            if (pattern.window & ((1 << verdicts) - 1)).bit_count() >= math.ceil(self.dup_share * verdicts - 1e-9):
                pattern.trap = True
                host.traps += 1

    @staticmethod
    def _evict(host: _Host) -> None:
        patterns = host.patterns
        victim = next((k for k, p in patterns.items() if not p.trap), None)
        if victim is None:
            victim = next(iter(patterns))
        if patterns.pop(victim).trap:
            host.traps -= 1

    # -- what it knows --------------------------------------------------------------------------------

    def traps(self) -> list[tuple[str, str, int]]:
        """(host, pattern, pages observed) of every pattern marked a trap."""
        return [(name, key, p.pages) for name, host in self._hosts.items() for key, p in host.patterns.items()
                if p.trap]

    def stats(self) -> dict[str, int]:
        """Counts for a summary: hosts, patterns, trap patterns, hosts with a soft-404 look-alike."""
        hosts = self._hosts.values()
        return {"hosts": len(self._hosts), "patterns": sum(len(h.patterns) for h in hosts),
                "trap_patterns": sum(h.traps for h in hosts), "soft_404_hosts": sum(h.probe == 2 for h in hosts)}

    # -- state ---------------------------------------------------------------------------------------

    def take_dirty(self) -> dict[str, bytes]:
        """{host: state bytes} of every host changed since the last call; write them with the same commit."""
        out = {name: self.host_state(name) for name in self._dirty}
        self._dirty.clear()
        return out

    def host_state(self, name: str) -> bytes:
        """One host's state as bytes (layout in the module docstring); b"" for a host never observed."""
        host = self._hosts.get(name)
        if host is None:
            return b""
        parts = [_HEAD.pack(STATE_VERSION, host.probe, len(host.look_alikes))]
        parts += [_REF.pack(*look) for look in host.look_alikes]
        parts.append(_U16.pack(len(host.patterns)))
        for key, p in host.patterns.items():
            raw = key.encode("utf-8", "surrogatepass")
            parts += [_U16.pack(len(raw)), raw, _PAT.pack(p.pages, p.window, int(p.trap), len(p.refs))]
            parts += [_REF.pack(*ref) for ref in p.refs]
        return b"".join(parts)

    def load_host(self, name: str, data: bytes) -> None:
        """Restore one host's state from `host_state` bytes (b"" forgets the host). StorageError if corrupt."""
        self._dirty.discard(name)
        if not data:
            self._hosts.pop(name, None)
            return
        try:
            self._hosts[name] = _decode_host(data)
        except (struct.error, UnicodeDecodeError, ValueError) as exc:
            raise StorageError(f"corrupt trap-detector state for host {name!r}: {exc}") from None

    def to_bytes(self) -> bytes:
        """Every host's state in one blob (u32 count, then per host u16 length + name, u32 length + state)."""
        parts = [_U32.pack(len(self._hosts))]
        for name in self._hosts:
            raw, state = name.encode("utf-8", "surrogatepass"), self.host_state(name)
            parts += [_U16.pack(len(raw)), raw, _U32.pack(len(state)), state]
        return b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes, **kwargs: object) -> TrapDetector:
        """A detector built with `kwargs` holding the state of `to_bytes`. StorageError if corrupt."""
        detector = cls(**kwargs)  # type: ignore[arg-type]
        try:
            (count,), pos = _U32.unpack_from(data), _U32.size
            for _ in range(count):
                (size,), pos = _U16.unpack_from(data, pos), pos + _U16.size
                name, pos = bytes(data[pos : pos + size]).decode("utf-8", "surrogatepass"), pos + size
                (size,), pos = _U32.unpack_from(data, pos), pos + _U32.size
                if pos + size > len(data):
                    raise ValueError("truncated")
                detector.load_host(name, bytes(data[pos : pos + size]))
                pos += size
            if pos != len(data):
                raise ValueError(f"{len(data) - pos} trailing bytes")
        except (struct.error, UnicodeDecodeError, ValueError) as exc:
            raise StorageError(f"corrupt trap-detector state: {exc}") from None
        return detector


def _decode_host(data: bytes) -> _Host:
    version, probe = data[0], data[1]
    if version not in (1, STATE_VERSION) or probe > 2:
        raise ValueError(f"unknown version {version} or probe state {probe}")
    if version == 1:
        _, _, simhash, shingles, count = _HEAD_V1.unpack_from(data)
        host = _Host(probe=probe, look_alikes=[PageSketch(simhash, shingles)] if probe == 2 else [])
        pos = _HEAD_V1.size
    else:
        n, pos = _HEAD.unpack_from(data)[2], _HEAD.size
        host = _Host(probe=probe, look_alikes=[PageSketch(*_REF.unpack_from(data, pos + i * _REF.size))
                                               for i in range(n)])
        pos += n * _REF.size
        (count,), pos = _U16.unpack_from(data, pos), pos + _U16.size
    for _ in range(count):
        (size,), pos = _U16.unpack_from(data, pos), pos + _U16.size
        key, pos = data[pos : pos + size].decode("utf-8", "surrogatepass"), pos + size
        if pos > len(data):
            raise ValueError("truncated")
        pages, window, flags, n = _PAT.unpack_from(data, pos)
        pos += _PAT.size
        refs = [PageSketch(*_REF.unpack_from(data, pos + i * _REF.size)) for i in range(n)]
        pos += n * _REF.size
        host.patterns[key] = _Pattern(pages, window, bool(flags & 1), refs)
        host.traps += flags & 1
    if pos != len(data):
        raise ValueError(f"{len(data) - pos} trailing bytes")
    return host


def _origin(url: str) -> tuple[str, str]:
    """("scheme://host[:port]", "host[:port]") of a canonical URL."""
    start = url.find("://") + 3
    end = url.find("/", start)
    if end < 0:
        return url, url[start:]
    return url[:end], url[start:end]
