"""URL canonicalisation: one string per resource, the input of the seen-test.

`canonicalize(url, base=None, rules=DEFAULT_RULES)` resolves and parses `url` as a browser does (the WHATWG
URL Standard: https://url.spec.whatwg.org/), so the crawler requests what a browser would request, then
applies the dedup rules below. In order:

1. WHATWG parsing, for http and https results only. Leading and trailing C0 controls and spaces and every
   tab/CR/LF are removed; backslashes are slashes; `base` is used exactly as the standard uses it
   ("https:x" on an http page is "https://x/", "///host" is "//host", "http:x" on an http page is a
   relative path); hosts are percent-decoded, mapped by UTS #46 (not IDNA 2003: "faß" stays "faß",
   punycoded), IPv4 number forms ("0x7f.1", "3232235521", "0300.0250.0.1") written as dotted quads and
   invalid ones refused; IPv6 compressed (RFC 5952, hex only); the scheme's default port dropped; dot
   segments removed ("%2e" counts as "."); characters each component does not allow percent-encoded as
   UTF-8 (lone surrogates as U+FFFD). Any other scheme, or what the standard calls a failure, is
   InvalidURL. `base` must itself be an absolute http(s) URL to be used; otherwise relative references
   are refused and absolute URLs do not need it.
2. Dedup rules, always on: userinfo dropped (credentials name no other resource and must not be
   stored); fragment dropped (unless `keep_fragment`); percent-escapes normalised as RFC 3986 section
   6.2.2 says (hex digits uppercased, escapes of unreserved characters ALPHA DIGIT - . _ ~ decoded;
   a "%" that starts no escape is left as it is, as browsers send it); "?" with nothing after it dropped;
   a host whose labels cannot be DNS labels (empty, longer than 63) or that is longer than 253
   characters is refused ("invalid host": no resolver could look it up; one trailing dot is kept, as
   browsers keep it).
3. Configurable rules (CanonicalRules): sort_query sorts the "&"-separated params by key, stably;
   strip_session_ids drops SESSION_ID_PARAMS query params and ";jsessionid=..." path params;
   strip_tracking drops utm_* and TRACKING_PARAMS. When a rule splits the query, empty params are
   dropped as well. Defaults differ on purpose: DEFAULT_RULES (the library, URLSeen, MemorySeen and the
   Scrapy plugin) keep session ids, as a caller's own URLs may need them (Scrapy's canonicalize_url keeps
   them too); the crawl (crawl.yaml `canonical`, config.DEFAULT_CANONICAL) strips them, since a crawler is
   handed a new session id per visit and every page would be new again. A data dir stores its rules'
   version tag, so a change of defaults would refuse every existing one.

The result is a WHATWG URL itself (parsing it again changes nothing) and idempotent:
canonicalize(canonicalize(u)) == canonicalize(u). Only InvalidURL is raised. Any change of output for
any input bumps CANONICAL_VERSION; `CanonicalRules.version_tag()` is the string stored in a data dir.

How: the WHATWG parser is ada (the `ada-url` package, C++). Calling it costs about 2 us a URL from
Python, so the common case takes a pure-Python fast path instead: ASCII input, a plain http(s) scheme
and host (letters, digits, "-", "_", no "xn--", last label starting with a letter, or a dotted-quad
IPv4), no userinfo, and no character in path or query that the standard would percent-encode or treat
specially (no backslash, space, control, quote, <, >, `, {, }, ^; no ' in the query). On such input the
standard's steps are only lowercasing, the port, and dot segments, which the fast path does; relative
references take it too when the base is a WHATWG URL already (a canonical page URL is). Everything else
goes to ada, and ada's result then goes through the same dedup rules. tests/test_canonical.py checks that
the two paths agree on every input of the web-platform-tests URL data and on generated URLs.

What the fast path costs, and what it does about it (profiled: a regex match and the dedup rules were
half each): the origin ("scheme://host:port" as written, lowercased) is checked by a regex once and then
memoised (_ORIGINS, bounded: a crawl meets the same origins over and over); the rest is split with
str.partition and plain tests; dot segments go through posixpath.normpath (C) when the path has no empty
segment. `canonicalize_many` (one call per page or batch) checks the characters of 64 URLs at once
(bytes.translate) instead of one regex search per URL.

In C: with the optional extension built (frontier/_native.c `canonicalize`; frontier.native says when it is
used), `canonicalize_many` runs the fast path there instead, with no Python call per URL: the same steps in
the same order on the same alphabet (origin and port, then escapes, session ids, dot segments, query rules),
relative references resolved against the base's parts that _base_info found. What C does not take (not
ASCII, not http(s), an "xn--" host, a character outside the alphabet, a base that is not fast: None there)
goes the Python way above, so the answers are the same; tests/test_native.py checks that a string from C is
always Python's answer, on wpt's inputs, generated and randomly mutated URLs, every combination of the rules,
with and without bases.

Speed (CPython 3.11, one core of a busy 2-core VM, CPU time, median of 5 interleaved runs, w3lib 2.5
canonicalize_url as the yardstick): 20,000 non-canonical URLs of `frontier.bench.stream.raw_variant`
(all on the fast path, a fresh variant each run): canonicalize 616k URL/s (8.1x w3lib; 466k, 6.2x before
the memo and the batch), canonicalize_many in batches of 1,000 2.4M URL/s in C (29x) and 749k URL/s in
Python (9.4x); the hrefs of 2,000 pages of the crawl benchmark's mock web resolved against their page:
canonicalize 843k URL/s (11.1x), canonicalize_many per page 3.9M URL/s in C (47x) and 953k URL/s in Python
(11.7x; 466k, 6.2x before). Through ada (IDN hosts, spaces, backslashes): 264k URL/s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import lru_cache
from posixpath import normpath
from types import ModuleType

from ada_url import join_url, normalize_url

from frontier.errors import ConfigError, InvalidURL
from frontier.native import native

__all__ = ["CANONICAL_VERSION", "CanonicalRules", "DEFAULT_RULES", "canonicalize", "canonicalize_many", "scheme_of",
           "url_host"]

CANONICAL_VERSION: int = 2  # 2: WHATWG URL Standard parsing (1: RFC 3986)

SESSION_ID_PARAMS = frozenset(
    {"jsessionid", "phpsessid", "sid", "sessionid", "session_id", "aspsessionid", "cfid", "cftoken"}
)
TRACKING_PARAMS = frozenset({"gclid", "fbclid", "msclkid", "dclid", "gbraid", "wbraid", "yclid"})
TRACKING_PREFIX = "utm_"


@dataclass(frozen=True, kw_only=True, slots=True)
class CanonicalRules:
    """Crawler rules on top of WHATWG parsing; part of the data dir's identity.

    Attributes:
        sort_query: sort query parameters by key (stable for equal keys).
        strip_session_ids: drop SESSION_ID_PARAMS query parameters and ;jsessionid= path parameters.
        strip_tracking: drop utm_* and TRACKING_PARAMS query parameters.
        keep_fragment: keep the #fragment (dropped by default: it never reaches the server).
    """

    sort_query: bool = True  # sort query params by key (stable for equal keys)
    strip_session_ids: bool = False  # drop SESSION_ID_PARAMS query params and ;jsessionid= path params
    strip_tracking: bool = False  # drop utm_* and TRACKING_PARAMS query params
    keep_fragment: bool = False

    def __post_init__(self) -> None:
        for f in fields(self):
            if type(getattr(self, f.name)) is not bool:
                raise ConfigError(f"must be true or false, got {getattr(self, f.name)!r}", key=f.name)

    def version_tag(self) -> str:
        """E.g. "canon2+sort_query": the version and the rules that are on. Adding a rule that is off by
        default leaves existing tags unchanged."""
        return "+".join([f"canon{CANONICAL_VERSION}"] + [f.name for f in fields(self) if getattr(self, f.name)])


DEFAULT_RULES = CanonicalRules()

_DEFAULT_PORTS = {"http": 80, "https": 443}
_MAX_HOST = 253  # DNS: 253 characters, labels of 1-63
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")  # the WHATWG scheme state; no match: a relative reference
_AUTHORITY_END = re.compile(r"[/\\?#]")
_C0_AND_SPACE = "".join(map(chr, range(0x21)))
_DROP_TAB_NL = str.maketrans("", "", "\t\n\r")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

# The fast path's input (ASCII is checked before; see the module docstring). A path or query character outside
# this class is one the standard percent-encodes or treats specially, and goes to ada; so does a "'" in a query.
_HEAD_UNSAFE = re.compile(r"[^!$-;=?-\[\]_a-z|~]")  # printable ASCII but " # < > \ ^ ` { } ("?" starts the query)
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_FAST_ORIGIN = re.compile(
    r"([Hh][Tt][Tt][Pp][Ss]?)://"
    rf"((?:[A-Za-z0-9_\-]{{1,63}}\.)*[A-Za-z][A-Za-z0-9_\-]{{0,62}}|(?:{_OCTET}\.){{3}}{_OCTET})"
    r"(?::([0-9]*))?"
)
_FRAGMENT_UNSAFE = re.compile(r"[\x00-\x20\x7f\"<>`]")


def _escape_table() -> dict[str, str]:
    """Every "%XX" in any case of hex digits -> the character if unreserved, else "%XX" uppercased."""
    table = {}
    for byte in range(256):
        upper, canonical = f"{byte:02X}", chr(byte) if chr(byte) in _UNRESERVED else f"%{byte:02X}"
        for hi in {upper[0], upper[0].lower()}:
            for lo in {upper[1], upper[1].lower()}:
                table[f"%{hi}{lo}"] = canonical
    return table


_ESCAPES = _escape_table()
# Only the escapes that change: a lowercase hex digit, or an unreserved character.
_PCT_FIX = re.compile(r"%(?:[0-9A-Fa-f][a-f]|[a-f][0-9A-F]|2[DE]|3[0-9]|4[1-9A-F]|5[0-9AF]|6[1-9A-F]|7[0-9AE])")
_PATH_SESSION_ID = re.compile(r";(?:%s)=[^/;]*" % "|".join(map(re.escape, sorted(SESSION_ID_PARAMS))), re.I)


def _fix_escape(m: re.Match[str]) -> str:
    return _ESCAPES[m[0]]


def _remove_dot_segments(path: str) -> str:
    """Dot segments of a path starting with "/" removed (WHATWG and RFC 3986 agree here). Without an empty
    segment, posixpath.normpath does it (in C); it would merge empty segments, and it drops a trailing slash."""
    if "//" not in path:
        out = normpath(path)
        return out + "/" if out != "/" and path.endswith(("/", "/.", "/..")) else out
    segments = path.split("/")
    out: list[str] = []
    for seg in segments[1:]:
        if seg == "..":
            if out:
                out.pop()
        elif seg != ".":
            out.append(seg)
    if segments[-1] in (".", ".."):
        out.append("")
    return "/" + "/".join(out)


def _param_key(param: str) -> str:
    return param.partition("=")[0]


def _normalize_query(query: str, rules: CanonicalRules) -> str:
    if "%" in query:
        query = _PCT_FIX.sub(_fix_escape, query)
    strip_sid, strip_trk = rules.strip_session_ids, rules.strip_tracking
    if strip_sid or strip_trk or (rules.sort_query and "&" in query):
        params = query.split("&")
        if "" in params:
            params = list(filter(None, params))
        if strip_sid or strip_trk:
            kept = []
            for p in params:
                key = p.partition("=")[0].lower()
                if strip_sid and key in SESSION_ID_PARAMS:
                    continue
                if strip_trk and (key in TRACKING_PARAMS or key.startswith(TRACKING_PREFIX)):
                    continue
                kept.append(p)
            params = kept
        if rules.sort_query and len(params) > 1:
            params.sort(key=_param_key)
        query = "&".join(params)
    return query


# -- the slow path: ada ---------------------------------------------------------------------------------------


@lru_cache(maxsize=64)
def _base_info(base: str) -> tuple[str | None, tuple[str, str, str | None] | None]:
    """("http" or "https" when `base` is an absolute http(s) URL, else None; its (origin, path, query) when
    the fast path may resolve against it: a WHATWG URL already, in the fast path's alphabet). Cached: the
    links of a page share a base."""
    try:
        href = normalize_url(_scalar(base))
    except ValueError:
        return None, None
    scheme = href[: href.find(":")]
    if scheme not in _DEFAULT_PORTS:
        return None, None
    head = base.partition("#")[0]
    if head != href.partition("#")[0] or not head.isascii():
        return scheme, None
    try:  # a WHATWG URL already: its text is its parts
        origin, slash = _origin(head, base)
    except InvalidURL:
        return scheme, None
    path, mark, query = head[slash:].partition("?")
    if _FAST_ORIGIN.fullmatch(origin) is None or _HEAD_UNSAFE.search(head, slash) or "'" in query:
        return scheme, None
    return scheme, (origin, path, query if mark else None)


def _scalar(text: str) -> str:
    """`text` as a string of Unicode scalar values (what the standard parses): lone surrogates -> U+FFFD."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _refusal(url: str, base: str | None, base_ok: bool) -> InvalidURL:
    """The InvalidURL for input the standard refuses. ada gives no reason; an http(s) URL can only fail on
    its host or port (or need a base), so name which."""
    text = url.strip(_C0_AND_SPACE).translate(_DROP_TAB_NL)
    scheme = scheme_of(text)
    if scheme is not None and scheme not in _DEFAULT_PORTS:
        return InvalidURL(url, "unsupported scheme")
    if scheme is None and not base_ok:
        return InvalidURL(url, "relative URL without a base" if base is None else "base is not an absolute http(s) URL")
    auth = _AUTHORITY_END.split(text[len(scheme) + 1 if scheme else 0 :].lstrip("/\\"), maxsplit=1)[0]
    auth = auth[auth.rfind("@") + 1 :]
    if auth[:1] == "[":
        host, _, port = auth.partition("]")
        port = port[1:] if port[:1] == ":" else ""
    else:
        host, _, port = auth.partition(":")
    digits = port.lstrip("0")
    if port and not (port.isascii() and port.isdigit() and len(digits) <= 5 and int(digits or "0") <= 65535):
        return InvalidURL(url, "invalid port")
    return InvalidURL(url, "invalid host" if host else "empty host")


def _check_host(host: str, url: str) -> None:
    """Refuse a host no resolver can look up (see the module docstring); IP literals pass."""
    if host[:1] == "[":
        return
    name = host[:-1] if host[-1:] == "." else host
    if not name or len(name) > _MAX_HOST or ".." in name or name[:1] == "." or name[-1:] == ".":
        raise InvalidURL(url, "invalid host")
    if len(name) > 63 and any(len(label) > 63 for label in name.split(".")):
        raise InvalidURL(url, "invalid host")


def _origin(href: str, url: str) -> tuple[str, int]:
    """("scheme://host[:port]" without userinfo, where the path starts) of a WHATWG http(s) URL; InvalidURL
    for a host no resolver can look up."""
    start = 8 if href[4] == "s" else 7
    slash = href.index("/", start)  # a special URL always has a path; userinfo has "/" escaped
    auth = href[start:slash]
    if "@" in auth:
        auth = auth[auth.rindex("@") + 1 :]
    _check_host(auth[: auth.rindex(":")] if auth[-1:] != "]" and ":" in auth else auth, url)
    return href[:start] + auth, slash


def _slow(url: str, base: str | None, rules: CanonicalRules) -> str:
    """The WHATWG parse by ada, then the dedup rules (those of the fast path: ada's href is in WHATWG form)."""
    base_ok = base is not None and _base_info(base)[0] is not None
    text = _scalar(url)
    try:
        href = join_url(_scalar(base), text) if base is not None and base_ok else normalize_url(text)
    except ValueError:
        raise _refusal(url, base, base_ok) from None
    if not href.startswith(("http:", "https:")):
        raise InvalidURL(url, "unsupported scheme")
    origin, slash = _origin(href, url)
    return _canonical(origin + href[slash:], None, rules, True, origin)  # type: ignore[return-value]


# -- the fast path --------------------------------------------------------------------------------------------


_ORIGINS: dict[str, str] = {}  # "scheme://host[:port]" lowercased -> its canonical form, "" if not fast
_ORIGINS_MAX = 16384  # cleared when full: a crawl meets the same origins over and over


def _fast_origin(written: str) -> str:
    """The canonical origin of `written` ("scheme://host[:port]", lowercase) when the fast path takes it, else ""."""
    m = _FAST_ORIGIN.fullmatch(written)
    origin = ""
    if m is not None:
        scheme, host, port = m[1].lower(), m[2].lower(), m[3]
        if "xn--" not in host and len(host) <= _MAX_HOST:
            origin = scheme + "://" + host
            if port:
                digits = port.lstrip("0")
                if len(digits) > 5 or int(digits or "0") > 65535:
                    origin = ""
                elif int(digits or "0") != _DEFAULT_PORTS[scheme]:
                    origin += ":" + (digits or "0")
    if len(_ORIGINS) >= _ORIGINS_MAX:
        _ORIGINS.clear()
    _ORIGINS[written] = origin
    return origin


def _canonical(url: str, base: str | None, rules: CanonicalRules, checked: bool = False,
               origin: str | None = None) -> str | None:
    """The canonical form when the fast path takes `url` (see the module docstring), else None.

    `checked`: `url` is known to hold no character outside _CHECKED (the alphabet checks are skipped).
    `origin`: `url` is a WHATWG http(s) URL already (ada's) and this its origin without userinfo: only the
    dedup rules remain. With both, the answer is never None."""
    if not checked and not url.isascii():
        return None
    head, _, fragment = url.partition("#")
    pre, mark, query = head.partition("?")
    colon = pre.find(":") if base is not None else 4  # without a base, only an absolute URL can be fast
    if colon == 4 or colon == 5:  # perhaps "http://" or "https://"
        end = pre.find("/", 8)  # where the path starts: past "http(s)://" and the host's first character
        if end < 0:  # no path: it is "/"
            end = len(pre)
            pre += "/"
        if origin is None:
            written = pre[:end].lower()
            origin = _ORIGINS.get(written)
            if origin is None:
                origin = _fast_origin(written)
            if not origin or not checked and (_HEAD_UNSAFE.search(head, end) or "'" in query):
                return None
        path = pre[end:]
    elif base is None:
        return None
    elif url[:2] == "//":  # scheme-relative: the base's scheme
        scheme = _base_info(base)[0]
        return _canonical(scheme + ":" + url, None, rules, checked) if scheme is not None else None
    else:
        parts = _base_info(base)[1]
        if (parts is None or (colon > 0 and _SCHEME.match(url) is not None)
                or not checked and (_HEAD_UNSAFE.search(head) or "'" in query)):
            return None
        origin, base_path, base_query = parts  # type: ignore[misc]
        path = pre  # a relative reference: RFC 3986 section 5.2.2, as the standard resolves it
        if not path:
            path = base_path
            if not mark and base_query is not None:
                query, mark = base_query, "?"
        elif path[0] != "/":
            path = base_path[: base_path.rfind("/") + 1] + path
    # The dedup rules. Escapes first: "%2e" is ".", and then a dot segment that the standard removes.
    if "%" in path:
        path = _PCT_FIX.sub(_fix_escape, path)
    if rules.strip_session_ids and ";" in path:
        path = _PATH_SESSION_ID.sub("", path)
    if "/." in path:
        path = _remove_dot_segments(path)
    if query:
        if "&" in query or "%" in query or rules.strip_session_ids or rules.strip_tracking:
            query = _normalize_query(query, rules)
        if query:
            path += "?" + query
    if fragment and rules.keep_fragment:
        if not checked and _FRAGMENT_UNSAFE.search(fragment):
            return None
        path += "#" + _PCT_FIX.sub(_fix_escape, fragment)
    return origin + path


# What `checked` promises: no character but these. They are the fast alphabet of a path and query (but "'",
# allowed in a path only), plus "#" and whatever else a fragment may hold without failing the fragment check.
_CHECKED = bytes(b for b in range(0x21, 0x7F) if chr(b) not in "\"'<>\\^`{}")
_CHUNK = 64  # URLs checked at once: one odd URL costs the others of its chunk their shortcut only


def _checked(chunk: Sequence[str]) -> bool:
    """True if every item of `chunk` is a str of _CHECKED characters only."""
    try:
        text = "".join(chunk)
    except TypeError:
        return False
    return text.isascii() and not text.encode().translate(None, _CHECKED)


def canonicalize(url: str, base: str | None = None, rules: CanonicalRules = DEFAULT_RULES) -> str:
    """Return the canonical form; raise InvalidURL(url, reason) for anything that is not a valid http(s) URL.

    Args:
        url: the URL, or with `base` a reference (an href) resolved against it first, as a browser resolves it.
        base: the absolute URL `url` is relative to (None: `url` is absolute).
        rules: the crawler's rules on top of WHATWG parsing.
    """
    if not isinstance(url, str):
        raise InvalidURL(repr(url), "not a string")
    if base is not None and not isinstance(base, str):
        raise InvalidURL(repr(base), "base is not a string")
    compiled = native()
    if compiled is not None:
        out, missed = compiled.canonicalize([url], _flags(rules), _NATIVE_NAMES,
                                            _base_info(base)[1] if base is not None else None)
        if not missed:
            return out[0]  # type: ignore[no-any-return]
    result = _canonical(url, base, rules)
    return result if result is not None else _slow(url, base, rules)


def canonicalize_many(urls: Sequence[str], base: str | None = None,
                      rules: CanonicalRules = DEFAULT_RULES) -> list[str | None]:
    """[canonicalize(u, base, rules) for u in urls], with None where that raises InvalidURL (call canonicalize
    on such a URL to learn why). The same answers, faster: the fast path runs in C when the extension is built
    (see "In C" above), else its character check runs on a chunk of URLs at once. Raises InvalidURL only for a
    `base` that is not a string."""
    if base is not None and not isinstance(base, str):
        raise InvalidURL(repr(base), "base is not a string")
    compiled = native()
    if compiled is not None:
        return _canonicalize_compiled(compiled, urls, base, rules)
    out: list[str | None] = []
    for start in range(0, len(urls), _CHUNK):
        chunk = urls[start : start + _CHUNK]
        if _checked(chunk):
            results = [_canonical(url, base, rules, True) for url in chunk]
        else:
            results = [_canonical(url, base, rules) if isinstance(url, str) else None for url in chunk]
        if None in results:
            results = [r if r is not None else _slow_or_none(u, base, rules) for r, u in zip(results, chunk)]
        out += results
    return out


# The parameter names of the rules, as frontier._native.canonicalize takes them.
_NATIVE_NAMES = (tuple(sorted(SESSION_ID_PARAMS)), tuple(sorted(TRACKING_PARAMS)), TRACKING_PREFIX)


def _flags(rules: CanonicalRules) -> tuple[bool, bool, bool, bool]:
    """The rules as frontier._native.canonicalize takes them."""
    return rules.sort_query, rules.strip_session_ids, rules.strip_tracking, rules.keep_fragment


def _canonicalize_compiled(compiled: ModuleType, urls: Sequence[str], base: str | None,
                           rules: CanonicalRules) -> list[str | None]:
    """canonicalize_many by the fast path in C (frontier/_native.c: _canonical's steps, none of its Python
    calls); what it leaves (None: not on its fast path) is decided here, one URL at a time."""
    out, missed = compiled.canonicalize(urls, _flags(rules), _NATIVE_NAMES,
                                        _base_info(base)[1] if base is not None else None)
    for i in missed:
        url = urls[i]
        result = _canonical(url, base, rules) if isinstance(url, str) else None
        out[i] = result if result is not None else _slow_or_none(url, base, rules)
    return out  # type: ignore[no-any-return]


def _slow_or_none(url: str, base: str | None, rules: CanonicalRules) -> str | None:
    try:
        return _slow(url, base, rules) if isinstance(url, str) else None
    except InvalidURL:
        return None


def scheme_of(url: str) -> str | None:
    """The scheme the standard finds in `url` (lowercase, e.g. "javascript"); None for a relative reference."""
    m = _SCHEME.match(url.strip(_C0_AND_SPACE).translate(_DROP_TAB_NL))
    return m[0][:-1].lower() if m is not None else None


def url_host(canonical_url: str) -> str:
    """The netloc (host[:port], lowercase, no userinfo) of an already canonical URL: the politeness key."""
    start = 8 if canonical_url[4:5] == "s" else 7
    end = canonical_url.find("/", start)
    return canonical_url[start:end] if end >= 0 else canonical_url[start:]
