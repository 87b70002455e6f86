"""Link extraction from an HTML page: bytes in, one batch of canonical http(s) links out.

    extract_links(body, page_url, *, content_type=None, honor_nofollow=True, rules=DEFAULT_RULES,
                  max_links=20000, cache=None, max_url_length=None) -> LinkBatch

A pure function (`cache`, a worker's HrefCache, changes no answer) that never raises on page content (malformed HTML, NUL bytes, binary garbage, an
unknown charset, a 100 KB href): whatever cannot become a link is counted in `LinkBatch.skipped`.

What counts as a link: `<a href>` and `<area href>`, in document order, resolved as a browser resolves
them (HTML "encoding-parse a URL": the WHATWG URL Standard, see `frontier.url.canonical`) against the first
`<base href>` (itself resolved against the page URL; one that does not parse, or a javascript: or data:
one, is ignored; one with another scheme, such as ftp:, leaves relative links unusable, as in a browser),
canonicalised with `frontier.url.canonical.canonicalize` (fragment dropped unless the rules keep it),
de-duplicated keeping the first occurrence. `<a href>` with an empty value is the page itself. On a page
whose encoding is not UTF-8 (nor UTF-16), non-ASCII characters in a link's query are encoded in the page's
encoding before percent-encoding, as browsers send them (an unencodable one as "&#N;", percent-encoded);
paths are UTF-8 on every page.

Not links, counted in `skipped`: hrefs that do not canonicalise (javascript:, mailto:, data:, tel:, ftp:, bad
host or port, a relative href when the page URL itself is unusable), with `max_url_length` (the fetcher passes
limits.max_url_length) hrefs longer than HREF_SLACK (16) times it (unparsed: a hostile page's 10M-character
href costs no scratch memory; only a fragment, whitespace, dot segments or character references could shrink
one that much, and the fetcher refuses links longer than `max_url_length` anyway; a `<base href>` that long is
ignored), every href after the first `max_links` distinct links (of those, at most one batch of 1,024 hrefs is
parsed), and every link tag after the first max(MIN_HREFS, HREFS_PER_LINK x max_links) of the page (4,096 and
4, so 24,000 for the default 6,000: they are counted, not read, so that a page of millions of links costs a
count; the DOM's clones of misnested links count as tags there).

Nofollow (when `honor_nofollow`): an element whose rel has the token "nofollow" is dropped, and a page with
`<meta name="robots" content="nofollow">` (or "none") yields no links at all (only metas that may be named
robots are kept, up to the same number as link tags, wherever they are on the page). Such hrefs are counted in
`LinkBatch.nofollow`, not in `skipped`: they are a policy, not a fault.

Decoding, in order (WHATWG's precedence, simplified): a byte-order mark; the charset parameter of the
Content-Type header; a `<meta charset>` or `<meta http-equiv content="...; charset=...">` in the first
2 KB; else UTF-8. An unknown or non-web charset name (rot13, idna, utf-7, ...) falls back to UTF-8;
"iso-8859-1"/"ascii" decode as windows-1252 (what browsers do) and a utf-16 label found in a meta tag means
UTF-8 (the page could not have been parsed to find it otherwise). Undecodable bytes become U+FFFD, which
canonicalize then percent-encodes as UTF-8. (Python's codecs stand in for the WHATWG Encoding Standard's:
they differ on a few code points, e.g. the five bytes windows-1252 leaves undefined.)

Parser: first `workers._linkscan` (C, optional, built by setup.py), one pass of the WHATWG HTML tokenizer that
collects the a/area/base/meta start tags without building a DOM (a NUL is what the tokenizer makes of it). A page
whose tree building would move or drop a link (template, math, select, frameset, an svg with more than shapes,
text, comments and "<?" bogus comments, a link or robots meta foster-parented out of a table, an escaped
script) it gives back, and selectolax (lexbor) parses it, as it parses every page without the extension, with
FRONTIER_NO_NATIVE=1, or when the trap detector wants the page's text. lexbor parses LEXBOR_PIECE (512 Ki)
characters at a time, one DOM at a time, each piece after the first starting at a "<" (its DOM takes up to
60 bytes a character: a 32 MiB page of dense tags took 2 GB whole): a page within one piece is parsed whole,
and the Debian documentation pages longer than one give the same links in pieces as whole.

What one page costs (`python -m frontier.bench page-cost`, docs/benchmarks.md): with the scanner at most about
2x the page's size in extra memory and 0.2 s of CPU per 10 MB on the hostile pages there (a 10M-character href,
32 MiB of links after a NUL, 2 M distinct links, 2 M metas); with lexbor at most about 4x (6x, 60 MB, for the
10M-character href: lexbor copies the value twice) and 0.5 s per 10 MB. Both give the same links in the same
order (tests/test_linkscan.py: real Javadoc and rust-doc pages, generated pages); the DOM alone holds clones of
misnested <a> elements, so `skipped` and `nofollow` count each tag as written once with the scanner. On 3,000
rust-doc pages (13 KB mean, CPU, best of 3): the scan 0.084 ms/page, lexbor's parse and query 0.76; the whole
extract_links 0.25-0.29 against 0.47-0.58 (4,000 pages; Javadoc 0.35-0.44 against 0.68-0.99).

Speed: a page's distinct hrefs are canonicalised in one `canonicalize_many` call, after the worker's
HrefCache: a site's menus and popular links are on every page, so most hrefs were resolved before (89% on
the crawl benchmark's mock web: 20,000 pages, 60 links a page, 80% repeated; two workers). On 3,000 of its
pages (CPU time, median of 5): 203 us a page before (one canonicalize call per href), 139 us with the
batch, 114 us with the batch and the cache (about 50 us of each is lexbor parsing the page). In the crawl
benchmark the two workers' CPU fell from 13.0 s to 9.6 s (means of 2 alternating runs, 26,732 pages each).
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from selectolax.lexbor import LexborHTMLParser

from frontier.crawl.traps import PageSketch, sketch
from frontier.errors import ConfigError, InvalidURL
from frontier.native import NO_NATIVE_ENV
from frontier.url.canonical import DEFAULT_RULES, CanonicalRules, canonicalize, canonicalize_many, scheme_of
from workers.charrefs import unescape_attribute

try:
    from workers._linkscan import scan as _built_scan  # the optional C tokenizer pass (setup.py)
except ImportError:
    _built_scan = None

__all__ = ["DEFAULT_HREF_CACHE", "DEFAULT_MAX_LINKS", "HrefCache", "LinkBatch", "ScopeMemo", "charset_of", "decode_html",
           "encode_query", "extract_links", "page_text"]

DEFAULT_MAX_LINKS = 6000  # Heritrix's default; config.LimitsConfig.max_links_per_page
DEFAULT_HREF_CACHE = 20_000  # hrefs per generation of a worker's HrefCache (two generations: about 10 MB at most)
_SLICE = 1024  # hrefs resolved in one batch
HREF_SLACK = 16  # an href longer than this many times max_url_length is skipped unparsed
LEXBOR_PIECE = 2**19  # characters lexbor parses at once: its DOM takes up to 60 bytes a character
HREFS_PER_LINK = 4  # a page's first max(MIN_HREFS, this x max_links) link tags are read; the rest are counted
MIN_HREFS = 4096
SNIFF_BYTES = 2048  # how far into the body a <meta charset> is looked for

_CT_CHARSET = re.compile(r"""charset\s*=\s*["']?\s*([^\s;"',]+)""", re.I)
# Matches both <meta charset="x"> and <meta http-equiv="Content-Type" content="text/html; charset=x">.
_META_CHARSET = re.compile(rb"""<meta\s[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:\-]+)""", re.I)
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
# Python codecs that exist but are no web charset: decoding with them is wrong or raises.
_NOT_WEB = frozenset({"idna", "punycode", "undefined", "unicode-escape", "raw-unicode-escape", "utf-7",
                      "mbcs", "oem", "palmos", "mac-latin2"})
# What browsers actually use for these labels.
_WEB_ALIASES = {"iso8859-1": "cp1252", "ascii": "cp1252", "latin-1": "cp1252"}

# One walk of the tree finds the links and what rules over them (lexbor's CSS match walks the whole tree per
# query: three queries cost 2.4x this one on Javadoc pages)
_NODES_CSS = "a[href], area[href], base[href], meta[name]"
_LINK_TAGS = frozenset(("a", "area"))
_NOT_TEXT_CSS = "script, style, noscript, template"


@dataclass(frozen=True, slots=True)
class LinkBatch:
    """The links of one page: canonical, distinct, in page order; `skipped` hrefs that are no usable link;
    `nofollow` hrefs dropped because of rel/meta nofollow; `sketch` the page text's simhash when asked for."""

    links: tuple[str, ...]
    skipped: int = 0
    nofollow: int = 0
    sketch: PageSketch | None = None


@lru_cache(maxsize=256)
def _codec(label: str, from_meta: bool = False) -> str | None:
    """The Python codec for a charset label, or None when it is unknown or not a web charset."""
    try:
        info = codecs.lookup(label.strip().lower())
    except (LookupError, ValueError):
        return None
    name = info.name
    if not getattr(info, "_is_text_encoding", True) or name in _NOT_WEB:
        return None
    if from_meta and name.startswith(("utf-16", "utf-32")):
        return "utf-8"
    return _WEB_ALIASES.get(name, name)


def charset_of(body: bytes, content_type: str | None = None) -> tuple[str, int]:
    """(Python codec name, bytes to skip for a BOM) the page decodes with; see the module docstring."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return name, len(bom)
    if content_type:
        m = _CT_CHARSET.search(content_type)
        if m:
            name = _codec(m[1])
            if name is not None:
                return name, 0
    m = _META_CHARSET.search(body, 0, SNIFF_BYTES)
    if m:
        name = _codec(m[1].decode("ascii"), True)
        if name is not None:
            return name, 0
    return "utf-8", 0


def _decode(body: bytes, content_type: str | None) -> tuple[str, str]:
    """(the page as text, the codec that decoded it)."""
    name, skip = charset_of(body, content_type)
    data = memoryview(body)[skip:] if skip else body
    try:
        return str(data, name, "replace"), name
    except (UnicodeError, LookupError):  # a codec that ignores errors="replace"
        return str(data, "utf-8", "replace"), "utf-8"


def decode_html(body: bytes, content_type: str | None = None) -> str:
    """The page as text, never raising: undecodable bytes become U+FFFD."""
    return _decode(body, content_type)[0]


# A query byte as the WHATWG special-query percent-encode set writes it.
_QUERY_BYTES = [chr(b) if 0x20 < b < 0x7F and chr(b) not in "\"#<>'" else f"%{b:02X}" for b in range(256)]
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


def _encode_run(run: str, codec: str) -> str:
    try:
        return "".join([_QUERY_BYTES[b] for b in run.encode(codec)])
    except UnicodeEncodeError:
        if len(run) > 1:
            return "".join(_encode_run(ch, codec) for ch in run)
        return f"%26%23{ord(run)}%3B"  # "&#N;", as the standard's "html" error mode writes it


def encode_query(href: str, codec: str) -> str:
    """`href` with its query's non-ASCII characters in the page's encoding, percent-encoded (see the module
    docstring); `codec` is the Python codec the page decoded with. Other hrefs are returned as they are."""
    if href.isascii() or codec.startswith("utf"):
        return href
    head, hash_, fragment = href.partition("#")
    path, mark, query = head.partition("?")
    if not mark or query.isascii():
        return href
    query = _NON_ASCII.sub(lambda m: _encode_run(m[0], codec), query)
    return path + "?" + query + hash_ + fragment


class HrefCache:
    """The links of the hrefs a worker has met before: a site's menus and popular links are on every page.

    Per base directory ("http://host:port/dir/" of a canonical base URL), href as written -> its link (None
    when it is no link). Only hrefs whose resolution takes nothing from the base but its scheme, host, port
    and directory are kept: not "", "?...", "#..." nor "http:" followed by nothing, "?" or "#" (those take
    the base's whole path or query), and none with a control character or a leading space (the standard
    strips those, which can change what the href is). So an answer is the one canonicalize_many gives
    under `rules`, which tests/test_links.py checks. Bounded: two generations of `size` hrefs; when the
    young one is full, the old one is dropped. Threads may share it (a lost entry or count is the worst a
    race can do).
    """

    def __init__(self, rules: CanonicalRules = DEFAULT_RULES, *, size: int = DEFAULT_HREF_CACHE) -> None:
        if type(size) is not int or size < 1:
            raise ConfigError(f"must be an int >= 1, got {size!r}", "size")
        self.rules = rules
        self.size = size
        self.hits = 0  # hrefs answered from the cache
        self.misses = 0  # hrefs canonicalised
        self._young: dict[str, dict[str, str | None]] = {}
        self._old: dict[str, dict[str, str | None]] = {}
        self._count = 0  # hrefs in the young generation
        self._last: tuple[str | None, str | None] = (None, "")  # the last base and its directory

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def resolve(self, hrefs: Sequence[str], base: str | None) -> list[str | None]:
        """canonicalize_many(hrefs, base, self.rules), from the cache where it can be."""
        directory = self._directory(base)
        if directory is None:
            self.misses += len(hrefs)
            return canonicalize_many(hrefs, base, self.rules)
        young = self._young.get(directory)
        if young is None:
            young = self._young[directory] = {}
        old = self._old.get(directory, _EMPTY)
        out: list[object] = []
        missing: list[str] = []
        for href in hrefs:
            link = young.get(href, _MISS)
            if link is _MISS:
                link = old.get(href, _MISS)
                if link is _MISS:
                    missing.append(href)
                else:
                    young[href] = link  # type: ignore[assignment]
                    self._count += 1
            out.append(link)
        self.hits += len(hrefs) - len(missing)
        if not missing:
            return out  # type: ignore[return-value]
        self.misses += len(missing)
        found = canonicalize_many(missing, base, self.rules)
        for href, link in zip(missing, found):
            if _context_free(href):
                young[href] = link
                self._count += 1
        if self._count >= self.size:
            self._old, self._young, self._count = self._young, {}, 0
        fill = iter(found)
        return [next(fill) if link is _MISS else link for link in out]  # type: ignore[misc]

    def _directory(self, base: str | None) -> str | None:
        """"scheme://host[:port]/dir/" of a canonical `base` ("" for no base); None for a base that is not
        canonical (its text might not be its parts)."""
        last = self._last  # one tuple, so that threads never see one base with another's directory
        if base == last[0]:
            return last[1]
        directory: str | None = ""
        if base is not None:
            try:
                canonical = canonicalize(base, rules=self.rules) == base
            except InvalidURL:
                canonical = False
            end = min(i for i in (base.find("?"), base.find("#"), len(base)) if i >= 0)
            directory = base[: base.rfind("/", 0, end) + 1] if canonical else None
        self._last = (base, directory)
        return directory


class ScopeMemo:
    """The links of a page that `check` (Scope.check, a pure function of the URL) lets through, with the
    verdicts of links met before remembered: a site's menus are on every page, and the path rules of a
    deep URL cost a regex and a segment walk. Bounded like HrefCache: two generations of `size` links (plus
    one page's).
    Threads may share it (a lost entry is the worst a race can do)."""

    def __init__(self, check: Callable[[str], str | None], *, size: int = DEFAULT_HREF_CACHE) -> None:
        if type(size) is not int or size < 1:
            raise ConfigError(f"must be an int >= 1, got {size!r}", "size")
        self._check = check
        self.size = size
        self._young: dict[str, bool] = {}
        self._old: dict[str, bool] = {}

    def kept(self, links: Sequence[str]) -> list[str]:
        """The links `check` finds no reason to skip, in order."""
        young, old, check = self._young, self._old, self._check
        out = []
        for url in links:
            ok = young.get(url)
            if ok is None:
                ok = old.get(url)
                if ok is None:
                    ok = check(url) is None
                young[url] = ok
            if ok:
                out.append(url)
        if len(young) >= self.size:
            self._old, self._young = young, {}
        return out


_MISS = object()
_EMPTY: dict[str, str | None] = {}


def _context_free(href: str) -> bool:
    """True if resolving `href` takes nothing from the base but its scheme, host, port and directory (see
    HrefCache)."""
    first = href[:1]
    if not first or first in "?# " or not href.isprintable():
        return False
    if first in "hH":
        scheme = href[:6].lower()
        end = 5 if scheme.startswith("http:") else 6 if scheme == "https:" else 0
        if end and href[end : end + 1] in ("", "?", "#"):
            return False
    return True


def _meta_nofollow(metas: Sequence[tuple[str | None, str | None]]) -> bool:
    for name, content in metas:
        if (name or "").strip().lower() != "robots":
            continue
        tokens = {t.strip() for t in (content or "").lower().split(",")}
        if "nofollow" in tokens or "none" in tokens:
            return True
    return False


def _is_nofollow(rel: str) -> bool:
    rel = rel.lower()
    return "nofollow" in rel and "nofollow" in rel.split()


def _base_url(base_href: str, page_url: str, rules: CanonicalRules) -> str | None:
    """The URL relative links resolve against (HTML "frozen base URL"); None: relative links are unusable."""
    try:
        return canonicalize(base_href, base=page_url, rules=rules)
    except InvalidURL as exc:
        if exc.reason == "unsupported scheme" and scheme_of(base_href) not in ("javascript", "data"):
            return None  # e.g. an ftp: base: the browser resolves relative links to ftp: URLs
        return page_url  # it does not parse, or javascript:/data:: the document's URL stays in charge


def extract_links(
    body: bytes,
    page_url: str,
    *,
    content_type: str | None = None,
    honor_nofollow: bool = True,
    rules: CanonicalRules = DEFAULT_RULES,
    max_links: int = DEFAULT_MAX_LINKS,
    cache: HrefCache | None = None,
    sketch_text: bool = False,
    max_url_length: int | None = None,
) -> LinkBatch:
    """The page's links as one batch; never raises on page content (see the module docstring). `cache`: the
    worker's HrefCache (made for the same `rules`), which changes no answer. `sketch_text`: also the
    `frontier.crawl.traps.sketch` of the page's text (`page_text`), for trap detection. `max_url_length`: hrefs
    longer than HREF_SLACK times it are skipped unparsed (None: no cap)."""
    if cache is not None and cache.rules is not rules and cache.rules != rules:
        raise ConfigError("made for other canonical rules", "cache")
    if not body:
        return LinkBatch(())
    text, codec = _decode(body, content_type)
    max_href = HREF_SLACK * max_url_length if max_url_length is not None else len(text)
    limit = max(MIN_HREFS, HREFS_PER_LINK * max_links)
    scan = None if sketch_text else scanner()
    found = scan(text, limit) if scan is not None else None
    if found is not None:
        found = _unescaped(*found, max_href=max_href)
        return _page_links(*found, page_url, codec, honor_nofollow, rules, max_links, cache, max_href)
    texts: list[str] | None = [] if sketch_text else None
    try:
        found = _from_tree(_lexbor_nodes(text, texts), limit)
    except Exception:  # lexbor refused the document (it should not); a page is never worth a crash
        return LinkBatch((), skipped=0)
    batch = _page_links(*found, page_url, codec, honor_nofollow, rules, max_links, cache, max_href)
    return replace(batch, sketch=sketch(" ".join(texts))) if texts is not None else batch


def _lexbor_nodes(text: str, texts: list[str] | None) -> Iterator[Any]:
    """lexbor's _NODES_CSS nodes of the page in document order, parsed LEXBOR_PIECE characters at a time (one
    DOM at a time: a hostile page of dense tags would build a DOM of 60 times its size); each piece's text goes
    to `texts` when it is a list. A page within one piece is parsed whole; a longer one is cut before a "<", so
    a link whose tag, table or template spans a cut may be read out of its context."""
    for piece in _pieces(text, LEXBOR_PIECE):
        tree = LexborHTMLParser(piece)
        yield from tree.css(_NODES_CSS)
        if texts is not None:
            texts.append(page_text(tree))
        del tree  # before the next piece's DOM is built


def _pieces(text: str, size: int) -> Iterator[str]:
    """`text` in consecutive pieces of about `size` characters, each but the first starting at a "<"."""
    start = 0
    while start < len(text):
        end = start + size
        if end < len(text):
            cut = text.rfind("<", start + 1, end)
            end = cut if cut > 0 else text.find("<", end)
            end = end if end > 0 else len(text)
        yield text[start:end] if start or end < len(text) else text
        start = end


def page_text(tree: LexborHTMLParser) -> str:
    """The visible text of a parsed page, what its sketch is made of: the <body> text, words separated, with
    scripts, styles, noscript and templates removed (from `tree`: call it after the links are taken)."""
    for node in tree.css(_NOT_TEXT_CSS):
        node.decompose()
    body = tree.body
    return body.text(separator=" ") if body is not None else ""


Found = tuple[list[str], "list[str | None] | None", "str | None", list[tuple[str | None, str | None]], int]


def scanner() -> Callable[[str, int], Found | None] | None:
    """workers._linkscan.scan, the tokenizer pass that finds a page's links without a DOM (None for a page it
    leaves to lexbor), when it is built and FRONTIER_NO_NATIVE does not switch compiled paths off."""
    if _built_scan is None or os.environ.get(NO_NATIVE_ENV, "") not in ("", "0"):
        return None
    return _built_scan  # type: ignore[no-any-return]


def _unescaped(hrefs: list[str], rels: list[str | None] | None, base: str | None,
               metas: list[tuple[str | None, str | None]], count: int, *, max_href: int | None = None) -> Found:
    """The scanner's values as lexbor gives them: character references decoded; hrefs longer than `max_href` as
    written are left as they are (they are skipped unparsed: decoding a hostile page's 10M-character query
    would cost its size many times over in match objects and pieces); a <meta> whose decoded name can no longer be
    robots is dropped, as lexbor's decoded tree drops it."""
    unescape = unescape_attribute
    hrefs = [unescape(h) if "&" in h and (max_href is None or len(h) <= max_href) else h for h in hrefs]
    if rels is not None:
        rels = [unescape(r) if r and "&" in r else r for r in rels]
    if base is not None:
        base = unescape(base)
    decoded = ((unescape(n) if n and "&" in n else n, unescape(c) if c else c) for n, c in metas)
    metas = [(n, c) for n, c in decoded if _maybe_robots(n)]  # a name kept for its "&" may decode to another
    return hrefs, rels, base, metas, count


def _maybe_robots(name: str | None) -> bool:
    """Whether a <meta> named `name` may be a robots meta once its character references are decoded."""
    return name is not None and ("&" in name or name.strip().lower() == "robots")


def _from_tree(nodes: Iterable[Any], limit: int = -1) -> Found:
    """What the scanner finds, from lexbor's nodes of _NODES_CSS in document order: the hrefs of the links, their rels
    (None: no link has one), the first <base href>, the (name, content) of each <meta> that may be a robots meta,
    and the number of links; with `limit` >= 0, at most `limit` hrefs and metas."""
    hrefs: list[str] = []
    rels: list[str | None] = []
    metas: list[tuple[str | None, str | None]] = []
    base: str | None = None
    count = 0
    for node in nodes:
        tag = node.tag
        attrs = node.attributes
        if tag in _LINK_TAGS:
            count += 1
            if limit < 0 or count <= limit:
                hrefs.append(attrs.get("href") or "")
                rels.append(attrs.get("rel"))
        elif tag == "meta":
            name = attrs.get("name")
            if _maybe_robots(name) and (limit < 0 or len(metas) < limit):
                metas.append((name, attrs.get("content")))
        elif base is None:
            base = attrs.get("href") or ""
    return hrefs, rels if any(rels) else None, base, metas, count


def _page_links(hrefs: list[str], rels: list[str | None] | None, base_href: str | None,
                metas: list[tuple[str | None, str | None]], count: int, page_url: str, codec: str,
                honor_nofollow: bool, rules: CanonicalRules, max_links: int, cache: HrefCache | None,
                max_href: int) -> LinkBatch:
    """The batch from a page's link hrefs and rels (document order), its first <base href> and robots <meta>s;
    `count` link tags in all, the ones past `hrefs` uncollected (skipped)."""
    if not count:
        return LinkBatch(())
    if honor_nofollow and _meta_nofollow(metas):
        return LinkBatch((), nofollow=count)
    uncollected = count - len(hrefs)

    base: str | None = page_url
    if base_href and len(base_href) <= max_href:
        base = _base_url(encode_query(base_href, codec), page_url, rules)
    marked: list[str | None] = list(hrefs)  # None: a nofollow link
    if honor_nofollow and rels is not None:
        marked = [None if rel and _is_nofollow(rel) else href for href, rel in zip(hrefs, rels)]

    seen: dict[str, None] = {}
    done: dict[str, str | None] = {}  # raw href -> its link, None if it is none; menus repeat the same href
    skipped = nofollow = 0
    for start in range(0, len(marked), _SLICE):  # past max_links, at most one slice of hrefs is resolved
        part = marked[start : start + _SLICE]
        new = [h for h in dict.fromkeys(part) if h is not None and h not in done]
        if new:
            fit = [h for h in new if len(h) <= max_href]
            if len(fit) < len(new):
                done.update(dict.fromkeys(new))  # None: too long to parse
            if fit:
                done.update(zip(fit, _resolve(fit, base, codec, rules, cache)))
        for i, href in enumerate(part):
            if len(seen) >= max_links:
                return LinkBatch(tuple(seen), skipped=skipped + len(marked) - start - i + uncollected,
                                 nofollow=nofollow)
            if href is None:
                nofollow += 1
                continue
            link = done[href]
            if link is None:
                skipped += 1
            else:
                seen[link] = None
    return LinkBatch(tuple(seen), skipped=skipped + uncollected, nofollow=nofollow)


def _resolve(hrefs: list[str], base: str | None, codec: str, rules: CanonicalRules,
             cache: HrefCache | None) -> list[str | None]:
    """The link of each href (None: not a link), hrefs as written on a page that decoded with `codec`."""
    if not codec.startswith("utf"):
        hrefs = [encode_query(h, codec) for h in hrefs]
    if cache is None:
        return canonicalize_many(hrefs, base, rules)
    return cache.resolve(hrefs, base)
