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
   dropped as well.

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
goes to ada. tests/test_canonical.py checks that the two paths agree on every input of the
web-platform-tests URL data and on generated URLs.

Speed (CPython 3.11, one core of a busy 2-core VM, CPU time, median of 5 interleaved runs; the 20,000
non-canonical URLs of `frontier.bench.stream.raw_variant`, all on the fast path): 456k URL/s, 6.0x w3lib
2.5 canonicalize_url (RFC 3986 version 1: 370k URL/s, 5.0x); hrefs resolved against their page, 60 a
page: 505k URL/s (version 1: 400k). Through ada (IDN hosts, spaces, backslashes): 235k URL/s (version 1,
with Python's IDNA codec: 71k).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from functools import lru_cache

from ada_url import join_url, normalize_url

from frontier.errors import ConfigError, InvalidURL

__all__ = ["CANONICAL_VERSION", "CanonicalRules", "DEFAULT_RULES", "canonicalize", "scheme_of", "url_host"]

CANONICAL_VERSION: int = 2  # 2: WHATWG URL Standard parsing (1: RFC 3986)

SESSION_ID_PARAMS = frozenset(
    {"jsessionid", "phpsessid", "sid", "sessionid", "session_id", "aspsessionid", "cfid", "cftoken"}
)
TRACKING_PARAMS = frozenset({"gclid", "fbclid", "msclkid", "dclid", "gbraid", "wbraid", "yclid"})
TRACKING_PREFIX = "utm_"


@dataclass(frozen=True, kw_only=True, slots=True)
class CanonicalRules:
    """Crawler rules on top of WHATWG parsing; part of the data dir's identity."""

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
# these classes is one the standard percent-encodes or treats specially, and goes to ada.
_PATH = r"[^\x00-\x20\x7f\"#<>?\\^`{}]"
_QUERY = r"[^\x00-\x20\x7f\"#<>'\\^`{}]"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_FAST_ABS = re.compile(
    r"([Hh][Tt][Tt][Pp][Ss]?)://"
    rf"((?:[A-Za-z0-9_\-]{{1,63}}\.)*[A-Za-z][A-Za-z0-9_\-]{{0,62}}|(?:{_OCTET}\.){{3}}{_OCTET})"
    rf"(?::([0-9]*))?(/{_PATH}*)?(?:\?({_QUERY}*))?"
)
_FAST_REL = re.compile(rf"(?![A-Za-z][A-Za-z0-9+.\-]*:)({_PATH}*)(?:\?({_QUERY}*))?")
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


def _fix_escapes(text: str) -> str:
    return _PCT_FIX.sub(_fix_escape, text) if "%" in text else text


def _remove_dot_segments(path: str) -> str:
    """Dot segments of a path starting with "/" removed, in one pass (WHATWG and RFC 3986 agree here)."""
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
    query = _fix_escapes(query)
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


def _finish(origin: str, path: str, query: str | None, fragment: str | None, rules: CanonicalRules) -> str:
    """The dedup rules on WHATWG components (origin = "scheme://host[:port]", userinfo already gone).

    The fast path passes a path whose dot segments are still there: after escapes are decoded, "%2e"
    is ".", so removing them here is what the standard does."""
    path = _fix_escapes(path)
    if rules.strip_session_ids and ";" in path:
        path = _PATH_SESSION_ID.sub("", path)
    if "/." in path:
        path = _remove_dot_segments(path)
    result = origin + path
    if query:
        query = _normalize_query(query, rules)
        if query:
            result += "?" + query
    if fragment and rules.keep_fragment:
        result += "#" + _fix_escapes(fragment)
    return result


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
    if head != href.partition("#")[0] or not head.isascii() or _FAST_ABS.fullmatch(head) is None:
        return scheme, None
    try:  # a WHATWG URL already: its text is its parts
        origin, slash = _origin(head, base)
    except InvalidURL:
        return scheme, None
    path, mark, query = head[slash:].partition("?")
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
    """The WHATWG parse by ada, then the dedup rules."""
    base_ok = base is not None and _base_info(base)[0] is not None
    text = _scalar(url)
    try:
        href = join_url(_scalar(base), text) if base is not None and base_ok else normalize_url(text)
    except ValueError:
        raise _refusal(url, base, base_ok) from None
    if not href.startswith(("http:", "https:")):
        raise InvalidURL(url, "unsupported scheme")
    origin, slash = _origin(href, url)
    rest, hash_, fragment = href[slash:].partition("#")
    path, question, query = rest.partition("?")
    return _finish(origin, path, query if question else None, fragment if hash_ else None, rules)


# -- the fast path --------------------------------------------------------------------------------------------


def _fast(url: str, base: str | None, rules: CanonicalRules) -> str | None:
    """The canonical form when `url` is in the fast path's alphabet (see the module docstring), else None."""
    if not url.isascii():
        return None
    hash_ = url.find("#")
    head = url if hash_ < 0 else url[:hash_]
    m = _FAST_ABS.fullmatch(head)
    if m is None and base is not None:
        if head[:2] == "//":  # scheme-relative: the base's scheme
            scheme = _base_info(base)[0]
            m = _FAST_ABS.fullmatch(scheme + ":" + head) if scheme is not None else None
        else:
            parts = _base_info(base)[1]
            r = _FAST_REL.fullmatch(head) if parts is not None else None
            if r is None:
                return None
            origin, path, query = parts  # type: ignore[misc]
            if r[1]:
                path = r[1] if r[1][0] == "/" else path[: path.rfind("/") + 1] + r[1]
            if r[1] or r[2] is not None:
                query = r[2]
            return _fast_finish(origin, path, query, url, hash_, rules)
    if m is None:
        return None
    scheme, host, port = m[1].lower(), m[2].lower(), m[3]
    if "xn--" in host or len(host) > _MAX_HOST:
        return None
    origin = scheme + "://" + host
    if port:
        digits = port.lstrip("0")
        if len(digits) > 5 or int(digits or "0") > 65535:
            return None
        if int(digits or "0") != _DEFAULT_PORTS[scheme]:
            origin += ":" + (digits or "0")
    return _fast_finish(origin, m[4] or "/", m[5], url, hash_, rules)


def _fast_finish(origin: str, path: str, query: str | None, url: str, hash_: int, rules: CanonicalRules) -> str | None:
    """_finish, with the fragment when the rules keep it and it is in the fast alphabet."""
    fragment = None
    if hash_ >= 0 and rules.keep_fragment:
        fragment = url[hash_ + 1 :]
        if _FRAGMENT_UNSAFE.search(fragment):
            return None
    return _finish(origin, path, query, fragment, rules)


def canonicalize(url: str, base: str | None = None, rules: CanonicalRules = DEFAULT_RULES) -> str:
    """Return the canonical form; raise InvalidURL(url, reason) for anything that is not a valid http(s) URL.

    With `base`, `url` is a reference (an href) resolved against it first, as a browser resolves it.
    """
    if not isinstance(url, str):
        raise InvalidURL(repr(url), "not a string")
    if base is not None and not isinstance(base, str):
        raise InvalidURL(repr(base), "base is not a string")
    result = _fast(url, base, rules)
    return result if result is not None else _slow(url, base, rules)


def scheme_of(url: str) -> str | None:
    """The scheme the standard finds in `url` (lowercase, e.g. "javascript"); None for a relative reference."""
    m = _SCHEME.match(url.strip(_C0_AND_SPACE).translate(_DROP_TAB_NL))
    return m[0][:-1].lower() if m is not None else None


def url_host(canonical_url: str) -> str:
    """The netloc (host[:port], lowercase, no userinfo) of an already canonical URL: the politeness key."""
    start = 8 if canonical_url[4:5] == "s" else 7
    end = canonical_url.find("/", start)
    return canonical_url[start:end] if end >= 0 else canonical_url[start:]
