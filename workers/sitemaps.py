"""Reading one sitemap or sitemap index (sitemaps.org 0.9) as its body streams in: bounded, and safe with XML.

    reader = SitemapReader(url, rules=cfg.canonical, max_url_length=2048)
    for chunk in body:                  # after Content-Encoding is undone (workers.fetcher)
        reader.feed(chunk)              # SitemapError(reason) stops the read
    sitemap = reader.close()            # .index, .urls (canonical, de-duplicated), .skipped

Bounds: a `.xml.gz` body (gzip magic at its start, whatever the headers say) is gunzipped here; the XML,
decompressed, may be at most MAX_BYTES (the protocol's 50 MiB), so a gzip bomb stops with
"sitemap_too_large" after MAX_BYTES + 1 bytes of output, decompressed at most CHUNK bytes per step (never a
whole bomb in memory). At most MAX_ENTRIES (the protocol's 50,000) URLs are kept from one file; the
rest, and <loc>s that are not URLs or longer than max_url_length, are counted in `skipped`.

XML safety: expat, fed chunk by chunk, with no DTD entity of any kind: an entity declaration (the
billion-laughs and quadratic-blowup attacks), an external entity reference or parameter entity parsing
stops the read as "sitemap_malformed", like any syntax error, a root that is neither <urlset> nor
<sitemapindex>, or a broken gzip stream. Elements are matched by local name in any namespace, and only
<loc> directly under <url> (or <sitemap>) counts: image:loc and video:loc extensions sit deeper.

Priority: a <url>'s <priority> (sitemaps.org: 0.0 to 1.0, default 0.5) is kept with its URL, in any order
within the <url>; a value that is not a number within 0.0..1.0 counts as absent (the default) and is counted in
`bad_priorities`. `Sitemap.priorities` is None when no <url> of the file names one (the crawl's scorer decides).

First interval (revisits): <changefreq> gives it (CHANGEFREQ: always = 0, bounded later by revisit.min_after;
never = 10 years, bounded by revisit.max_after); without one, <lastmod> (W3C datetime) does: the time since the
page last changed, when that is in the past. Values that do not parse are counted in `bad_hints` and ignored.
`Sitemap.first_intervals` is None when no <url> of the file gives one.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from xml.parsers import expat

from frontier.errors import InvalidURL
from frontier.url.canonical import CanonicalRules, canonicalize

__all__ = ["CHANGEFREQ", "CHUNK", "DEFAULT_PRIORITY", "MAX_BYTES", "MAX_ENTRIES", "Sitemap", "SitemapError", "SitemapReader"]

MAX_BYTES = 50 * 1024 * 1024  # decompressed XML of one file (sitemaps.org: 50 MiB)
MAX_ENTRIES = 50_000  # URLs kept from one file (sitemaps.org: 50,000)
CHUNK = 256 * 1024  # most bytes decompressed in one step
DEFAULT_PRIORITY = 0.5  # sitemaps.org: a <url> without <priority>
CHANGEFREQ = {"always": 0.0, "hourly": 3600.0, "daily": 86_400.0, "weekly": 604_800.0, "monthly": 2_592_000.0,
              "yearly": 31_536_000.0, "never": 315_360_000.0}  # <changefreq> -> a first interval (seconds)
_GZIP_MAGIC = b"\x1f\x8b"
_ENTRY = {"urlset": "url", "sitemapindex": "sitemap"}
_FIELDS = ("loc", "priority", "changefreq", "lastmod")  # what is read of an entry
_NS = "\x01"  # expat's namespace separator: "uri\x01local"


class SitemapError(Exception):
    """The file cannot be used; `reason` is the fetch's skip reason (sitemap_malformed, sitemap_too_large)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Sitemap:
    """What one file lists: pages (`index` False) or sitemaps (`index` True), canonical, first occurrence
    first; `skipped`: <loc>s not kept (not URLs, too long, past MAX_ENTRIES, repeated). `priorities`: one per
    URL (its <priority>, else DEFAULT_PRIORITY), or None when the file names none; `first_intervals` likewise,
    None for a URL without a hint."""

    index: bool
    urls: tuple[str, ...]
    skipped: int
    priorities: tuple[float, ...] | None = None
    bad_priorities: int = 0
    first_intervals: tuple[float | None, ...] | None = None  # one per URL: <changefreq> or <lastmod>'s, or None
    bad_hints: int = 0


class SitemapReader:
    """A streaming parser of one file; see the module docstring. One reader per fetch."""

    def __init__(self, url: str, *, rules: CanonicalRules, max_url_length: int, max_bytes: int = MAX_BYTES,
                 max_entries: int = MAX_ENTRIES) -> None:
        self.url = url
        self._rules = rules
        self._max_url_length = max_url_length
        self._max_bytes = max_bytes
        self._max_entries = max_entries
        self.size = 0  # decompressed XML bytes fed to the parser
        self._fed = 0  # bytes fed (the .gz file itself when it is one)
        self._root: str | None = None
        self._gunzip: zlib._Decompress | None = None  # type: ignore[name-defined]
        self._mode = ""  # "" until the first 2 bytes tell: "xml", "gzip", or "done" (bytes after the last member)
        self._head = b""  # bytes held until they tell whether a gzip member starts
        self._stack: list[str] = []
        self._text: list[str] | None = None  # the <loc> or <priority> being read
        self._text_len = 0
        self._loc_text: tuple[str, int] | None = None  # the entry's <loc> (text, length), kept to its end
        self._priority: float | None = None  # the entry's <priority>
        self._first: float | None = None  # the entry's first interval: its <changefreq>'s
        self._lastmod: float | None = None  # the entry's <lastmod> (epoch seconds)
        self._urls: dict[str, tuple[float | None, float | None]] = {}  # url -> (priority, first interval)
        self._skipped = 0
        self._bad_priorities = 0
        self._bad_hints = 0
        self._now = time.time()
        self._parser = expat.ParserCreate(namespace_separator=_NS)
        self._parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        self._parser.EntityDeclHandler = self._refuse_entity
        self._parser.UnparsedEntityDeclHandler = self._refuse_entity
        self._parser.ExternalEntityRefHandler = self._refuse_entity
        self._parser.StartElementHandler = self._start
        self._parser.EndElementHandler = self._end
        self._parser.CharacterDataHandler = self._chars
        self._parser.buffer_text = True

    def room(self) -> int:
        """Bytes the caller's Content-Encoding decoder may still hand over: one past the cap, so that a
        body cut there by the decoder is reported too large by `feed`, never parsed short."""
        return max(1, self._max_bytes + 1 - self._fed)

    def feed(self, data: bytes) -> None:
        """The next bytes of the body (Content-Encoding undone). Raises SitemapError."""
        if not data:
            return
        self._fed += len(data)
        if self._fed > self._max_bytes:
            raise SitemapError("sitemap_too_large", f"over {self._max_bytes} bytes")
        if not self._mode:
            data, self._head = self._head + data, b""
            if len(data) < len(_GZIP_MAGIC):
                self._head = data
                return
            self._mode = "gzip" if data.startswith(_GZIP_MAGIC) else "xml"
        if self._mode == "xml":
            self._xml(data)
            return
        try:
            while data and self._mode == "gzip":
                if self._gunzip is None or self._gunzip.eof:  # a (next) gzip member, or trailing bytes
                    data, self._head = self._head + data, b""
                    if len(data) < len(_GZIP_MAGIC) and _GZIP_MAGIC.startswith(data):
                        self._head = data
                        return
                    if not data.startswith(_GZIP_MAGIC):
                        self._mode = "done"  # ignored, as gzip -d does
                        return
                    self._gunzip = zlib.decompressobj(16 + zlib.MAX_WBITS)
                self._xml(self._gunzip.decompress(data, CHUNK))
                data = self._gunzip.unused_data if self._gunzip.eof else self._gunzip.unconsumed_tail
        except zlib.error as exc:
            raise SitemapError("sitemap_malformed", f"gzip: {exc}") from None

    def close(self) -> Sitemap:
        """The end of the body: what the file lists. Raises SitemapError."""
        if self._mode == "gzip" and self._gunzip is not None and not self._gunzip.eof:
            raise SitemapError("sitemap_malformed", "truncated gzip stream")
        if not self._mode:
            self._xml(self._head)  # a body of one byte
        self._parse(b"", final=True)  # an empty body: "no element found"
        values = self._urls.values()
        priorities = tuple(DEFAULT_PRIORITY if p is None else p for p, _ in values) if any(
            p is not None for p, _ in values) else None
        firsts = tuple(f for _, f in values) if any(f is not None for _, f in values) else None
        return Sitemap(index=self._root == "sitemapindex", urls=tuple(self._urls), skipped=self._skipped,
                       priorities=priorities, bad_priorities=self._bad_priorities, first_intervals=firsts,
                       bad_hints=self._bad_hints)

    # -- expat ------------------------------------------------------------------------------------

    def _xml(self, data: bytes) -> None:
        if not data:
            return
        self.size += len(data)
        if self.size > self._max_bytes:
            raise SitemapError("sitemap_too_large", f"over {self._max_bytes} bytes of XML")
        self._parse(data, final=False)

    def _parse(self, data: bytes, *, final: bool) -> None:
        try:
            self._parser.Parse(data, final)
        except expat.ExpatError as exc:
            raise SitemapError("sitemap_malformed", str(exc)) from None

    def _refuse_entity(self, *args: object) -> None:
        raise SitemapError("sitemap_malformed", "DTD entities are not accepted")

    def _start(self, name: str, attrs: object) -> None:
        local = name.rpartition(_NS)[2]
        self._stack.append(local)
        depth = len(self._stack)
        if depth == 1:
            if local not in _ENTRY:
                raise SitemapError("sitemap_malformed", f"root element <{local}> is not urlset or sitemapindex")
            self._root = local
        elif depth == 2 and local == _ENTRY[self._stack[0]]:
            self._loc_text, self._priority, self._first, self._lastmod = None, None, None, None
        elif depth == 3 and local in _FIELDS and self._stack[1] == _ENTRY[self._stack[0]]:
            self._text, self._text_len = [], 0

    def _chars(self, data: str) -> None:
        if self._text is not None:
            self._text_len += len(data)
            if self._text_len <= self._max_url_length * 4:  # whitespace around a URL is fine; a book is not
                self._text.append(data)

    def _end(self, name: str) -> None:
        depth = len(self._stack)
        if self._text is not None and depth == 3:
            text = "".join(self._text).strip()
            field = self._stack[2]
            if field == "loc":
                self._loc_text = (text, self._text_len)
            elif field == "priority":
                self._priority = self._read_priority(text)
            elif field == "changefreq":
                self._first = CHANGEFREQ.get(text.lower())
                self._bad_hints += self._first is None
            else:
                self._lastmod = self._read_lastmod(text)
            self._text = None
        elif depth == 2 and self._loc_text is not None and self._stack[1] == _ENTRY[self._stack[0]]:
            first = self._first
            if first is None and self._lastmod is not None and self._lastmod < self._now:
                first = self._now - self._lastmod
            self._loc(*self._loc_text, self._priority, first)
            self._loc_text = None
        self._stack.pop()

    def _read_priority(self, text: str) -> float | None:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if 0.0 <= value <= 1.0:
            return value
        self._bad_priorities += 1
        return None

    def _read_lastmod(self, text: str) -> float | None:
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            self._bad_hints += 1
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        return when.timestamp()

    def _loc(self, text: str, length: int, priority: float | None, first: float | None) -> None:
        if len(self._urls) >= self._max_entries or length > self._max_url_length * 4:
            self._skipped += 1
            return
        try:
            url = canonicalize(text, base=self.url, rules=self._rules)
        except InvalidURL:
            self._skipped += 1
            return
        if len(url) > self._max_url_length or url in self._urls:
            self._skipped += 1
            return
        self._urls[url] = (priority, first)
