"""Is this URL in the crawl's scope? One `Scope`, built from plain values or from a `CrawlConfig`.

`Scope.check(url)` takes a URL that is already canonical (see `frontier.url.canonical`: lowercase scheme and
host, IDNA host, default port dropped) and returns None when the URL may be fetched, else the named
skip reason, checked in this order:

    "url_too_long"       longer than `max_url_length` characters
    "out_of_scope"       the host is neither an allowed host nor in an allowed domain
    "private_address"    `block_private` is on and the host is "localhost" (or *.localhost) or an IP
                         literal in a private, loopback, link-local, reserved, multicast or unspecified range
    "too_many_segments"  the path has more than `max_path_segments` segments
    "repeated_segment"   a run of one or more path segments repeats back to back more than
                         `max_segment_repeats` times
    "excluded"           some `exclude` pattern matches (re.search over the whole canonical URL)
    "not_included"       `include` is non-empty and no pattern matches

Host rules:
  * `allowed_hosts` match exactly, port included: "example.com" (a default port, 80 or 443, is dropped
    as canonicalize drops it) or "example.com:8080" or "[::1]:8081".
  * `allowed_domains` match the domain itself and any subdomain, on any port: "example.com" admits
    "example.com" and "www.example.com:8080", never "evilexample.com". A leading "." or "*." is ignored.
    The entry "*" admits every host (the open web).
  * With both empty, every host is admitted. (The crawl config does *not* mean "every host" by empty
    lists: `CrawlConfig.effective_scope()` then narrows the scope to the seeds' hosts.)

`block_private` looks at the URL's text only; it never resolves DNS. A public name that resolves to a
private address (or is rebound to one) passes here: resolution-time checks belong to the fetcher, which
sees the address it actually connects to. Numeric IPv4 spellings that resolvers accept ("127.1",
"2130706433", "0x7f.1") are recognised as the addresses they spell.

Path rules (crawler traps that grow the path; Heritrix's TooManyPathSegmentsDecideRule and
PathologicalPathDecideRule, with the same defaults, on unless set to None or 0):
  * `max_path_segments` (20): a path has as many segments as "/" characters ("/" is 1, "/a/b.html" 2,
    "/a/b/" 3). Heritrix counts every "/" of the whole URL, the two of "://" and any in the query
    included, so its 20 allows about 18 path segments; here the query does not count. Real URLs rarely
    pass 10 segments; relative-link loops and mirrors grow by one or two a hop and reach 20 quickly.
  * `max_segment_repeats` (2): "/a/a/a/x" (one segment three times) and "/a/b/a/b/a/b/" (a run of two,
    three times) are refused, "/a/a/x" and "/a/x/a/y/a/" are not: what Heritrix's regex
    `.*?/(.*?/)\1{2,}.*` matches, consecutive repeats of whole segments each followed by "/", so a last
    segment without "/" ("/a/a/a") does not count. Unlike Heritrix, the query is not searched. A
    relative href like "sub/" on a page that answers for any path is refused at its third copy.

This runs for every extracted link in the worker processes, so host verdicts are cached per host and
no regex work is done when include/exclude are empty. A Scope pickles as its constructor arguments
(the cache and compiled patterns are rebuilt on the other side).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from frontier.errors import ConfigError, InvalidURL
from frontier.url.canonical import canonicalize, url_host

if TYPE_CHECKING:
    from frontier.config import CrawlConfig

__all__ = [
    "EXCLUDED",
    "NOT_INCLUDED",
    "OUT_OF_SCOPE",
    "PRIVATE_ADDRESS",
    "REPEATED_SEGMENT",
    "Scope",
    "TOO_MANY_SEGMENTS",
    "URL_TOO_LONG",
    "has_repeated_run",
    "is_private_host",
    "normalize_domain",
    "normalize_host",
    "split_port",
]

OUT_OF_SCOPE = "out_of_scope"
EXCLUDED = "excluded"
NOT_INCLUDED = "not_included"
URL_TOO_LONG = "url_too_long"
PRIVATE_ADDRESS = "private_address"
TOO_MANY_SEGMENTS = "too_many_segments"
REPEATED_SEGMENT = "repeated_segment"

DEFAULT_MAX_URL_LENGTH = 2048
DEFAULT_MAX_PATH_SEGMENTS = 20  # Heritrix TooManyPathSegmentsDecideRule.maxPathDepth
DEFAULT_MAX_SEGMENT_REPEATS = 2  # Heritrix PathologicalPathDecideRule.maxRepetitions
# Host verdicts kept before the cache is dropped and rebuilt (bounds memory on an open-web crawl).
HOST_CACHE_SIZE = 100_000

_OK = ""  # cached host verdict meaning "this host passes"
_DEFAULT_PORTS = (":80", ":443")


def split_port(host: str) -> tuple[str, str]:
    """Split a canonical netloc "host[:port]" into ("host", ":port" or ""); IPv6 keeps its brackets."""
    if host.startswith("["):
        end = host.find("]")
        if end != -1:
            return host[: end + 1], host[end + 1 :]
        return host, ""
    name, sep, port = host.rpartition(":")
    if sep:
        return name, sep + port
    return host, ""


def _netloc_of(entry: str, what: str) -> str:
    """Canonical "host[:port]" of a bare host entry; ValueError with a readable reason if it is not one."""
    if not isinstance(entry, str):
        raise ValueError(f"expected a string {what}, got {type(entry).__name__}")
    text = entry.strip()
    if not text:
        raise ValueError(f"empty {what}")
    if "://" in text:
        raise ValueError(f"give a bare {what} (like 'example.com:8080'), not a URL: {entry!r}")
    if any(c in text for c in "/?#@\\") or any(c.isspace() for c in text):
        raise ValueError(f"not a valid {what}: {entry!r}")
    try:
        netloc = url_host(canonicalize(f"http://{text}/"))
    except InvalidURL as exc:
        raise ValueError(f"not a valid {what}: {entry!r} ({exc.reason})") from None
    if netloc.endswith(_DEFAULT_PORTS):  # ":80" is already gone; ":443" is the https default
        netloc = split_port(netloc)[0]
    return netloc


def normalize_host(entry: str) -> str:
    """An allowed-hosts entry as canonical URLs spell it: lowercase, IDNA, "host" or "host:port".

    Default ports (80, 443) are dropped, so "Example.COM:443" becomes "example.com". Raises ValueError.
    """
    return _netloc_of(entry, "host")


def normalize_domain(entry: str) -> str:
    """An allowed-domains entry: lowercase IDNA domain without port; "*" stays "*". Raises ValueError."""
    if isinstance(entry, str):
        text = entry.strip()
        if text == "*":
            return "*"
        if text.startswith("*."):
            text = text[2:]
        entry = text.lstrip(".")
        if split_port(entry)[1]:
            raise ValueError(f"a domain has no port (use allowed_hosts for host:port): {entry!r}")
    return _netloc_of(entry, "domain")


_NUMERIC_V4 = re.compile(r"[0-9a-fx.]+\Z")


def is_private_host(name: str) -> bool:
    """True for "localhost", "*.localhost" and IP literals that are not public unicast addresses.

    `name` is a canonical host without port ("[::1]" keeps its brackets). Never resolves DNS.
    """
    if name == "localhost" or name.endswith(".localhost"):
        return True
    literal = name[1:-1] if name.startswith("[") and name.endswith("]") else name
    try:
        addr: Any = ipaddress.ip_address(literal)
    except ValueError:
        if not _NUMERIC_V4.match(literal) or not any(c.isdigit() for c in literal):
            return False
        try:  # "127.1", "2130706433", "0x7f.1": spellings the system resolver accepts
            addr = ipaddress.IPv4Address(socket.inet_aton(literal))
        except OSError:
            return False
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:  # "::ffff:10.0.0.1" is 10.0.0.1
            return is_private_host(str(addr.ipv4_mapped))
        if addr.sixtofour is not None and is_private_host(str(addr.sixtofour)):
            return True
    return bool(
        addr.is_private
        or addr.is_loopback
        or addr.is_link_local
        or addr.is_reserved
        or addr.is_multicast
        or addr.is_unspecified
        or not addr.is_global
    )


def has_repeated_run(segments: Sequence[str], max_repeats: int) -> bool:
    """True when some run of one or more consecutive segments appears more than `max_repeats` times back
    to back: ["a", "a", "a"] or ["x", "a", "b", "a", "b", "a", "b"] with max_repeats=2.

    A run of length k repeated r + 1 times is k * r consecutive positions i with segments[i] ==
    segments[i + k]; each k is one pass, so the cost is O(n^2 / max_repeats), and O(n) when no segment
    occurs twice."""
    n = len(segments)
    if n <= max_repeats or len(set(segments)) == n:
        return False
    for k in range(1, n // (max_repeats + 1) + 1):
        need, streak = k * max_repeats, 0
        for i in range(n - k):
            if segments[i] == segments[i + k]:
                streak += 1
                if streak >= need:
                    return True
            else:
                streak = 0
    return False


def _tuple_of_str(values: Iterable[str] | str, key: str) -> tuple[str, ...]:
    if isinstance(values, (str, bytes)):
        raise ConfigError(f"expected a list of strings, got a single {type(values).__name__}", key=key)
    return tuple(values)


def _compile_all(patterns: tuple[str, ...], key: str) -> tuple[re.Pattern[str], ...]:
    compiled = []
    for i, pattern in enumerate(patterns):
        if not isinstance(pattern, str):
            raise ConfigError(f"expected a regex string, got {type(pattern).__name__}", key=f"{key}[{i}]")
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise ConfigError(f"bad regular expression {pattern!r}: {exc}", key=f"{key}[{i}]") from None
    return tuple(compiled)


class Scope:
    """Decides whether a canonical URL is in the crawl's scope; see the module docstring for the rules.

    Constructor arguments are plain values (bad ones raise ConfigError naming the argument);
    `from_config` reads a `CrawlConfig`.
    """

    __slots__ = (
        "_any_host",
        "_args",
        "_domains",
        "_exclude",
        "_hosts",
        "_host_cache",
        "_include",
        "_max_repeats",
        "_max_segments",
        "_max_url_length",
        "_path_slashes",
        "block_private",
    )

    def __init__(
        self,
        *,
        allowed_hosts: Iterable[str] = (),
        allowed_domains: Iterable[str] = (),
        include: Iterable[str] = (),
        exclude: Iterable[str] = (),
        max_url_length: int = DEFAULT_MAX_URL_LENGTH,
        block_private: bool = False,
        max_path_segments: int | None = DEFAULT_MAX_PATH_SEGMENTS,
        max_segment_repeats: int | None = DEFAULT_MAX_SEGMENT_REPEATS,
    ) -> None:
        hosts = _tuple_of_str(allowed_hosts, "allowed_hosts")
        domains = _tuple_of_str(allowed_domains, "allowed_domains")
        inc = _tuple_of_str(include, "include")
        exc = _tuple_of_str(exclude, "exclude")
        norm_hosts = []
        for i, h in enumerate(hosts):
            try:
                norm_hosts.append(normalize_host(h))
            except ValueError as err:
                raise ConfigError(str(err), key=f"allowed_hosts[{i}]") from None
        norm_domains = []
        for i, d in enumerate(domains):
            try:
                norm_domains.append(normalize_domain(d))
            except ValueError as err:
                raise ConfigError(str(err), key=f"allowed_domains[{i}]") from None
        if isinstance(max_url_length, bool) or not isinstance(max_url_length, int) or max_url_length < 1:
            raise ConfigError(f"expected a positive integer, got {max_url_length!r}", key="max_url_length")
        if not isinstance(block_private, bool):
            raise ConfigError(f"expected true or false, got {block_private!r}", key="block_private")
        for key, value in (("max_path_segments", max_path_segments), ("max_segment_repeats", max_segment_repeats)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ConfigError(f"expected an integer >= 0 or null (0 and null: no limit), got {value!r}", key=key)

        self._args = {
            "allowed_hosts": tuple(norm_hosts),
            "allowed_domains": tuple(norm_domains),
            "include": inc,
            "exclude": exc,
            "max_url_length": max_url_length,
            "block_private": block_private,
            "max_path_segments": max_path_segments,
            "max_segment_repeats": max_segment_repeats,
        }
        self._hosts = frozenset(norm_hosts)
        self._domains = frozenset(d for d in norm_domains if d != "*")
        self._any_host = "*" in norm_domains or not (norm_hosts or norm_domains)
        # None (not an empty tuple) when there is nothing to match, so check() skips regex work entirely.
        self._include = _compile_all(inc, "include") or None
        self._exclude = _compile_all(exc, "exclude") or None
        self._max_url_length = max_url_length
        self.block_private = block_private
        self._max_segments = max_path_segments or None  # 0 and None: off
        self._max_repeats = max_segment_repeats or None
        # Fewest slashes in a whole URL ("://" is 2) that can break a path rule: max_path_segments + 1 in
        # the path, or max_segment_repeats + 2 ("/a/a/a/" for 2); a URL with fewer skips the path rules.
        bounds = [limit for limit in (self._max_segments and self._max_segments + 1,
                                      self._max_repeats and self._max_repeats + 2) if limit]
        self._path_slashes = 2 + min(bounds) if bounds else 1 << 62
        self._host_cache: dict[str, str] = {}

    @classmethod
    def from_config(cls, cfg: CrawlConfig) -> Scope:
        """The scope of a crawl: `cfg.effective_scope()` (seed hosts when no host rule is given)."""
        sc = cfg.effective_scope()
        return cls(
            allowed_hosts=sc.allowed_hosts,
            allowed_domains=sc.allowed_domains,
            include=sc.include,
            exclude=sc.exclude,
            max_url_length=cfg.limits.max_url_length,
            block_private=sc.block_private,
            max_path_segments=sc.max_path_segments,
            max_segment_repeats=sc.max_segment_repeats,
        )

    # -- the hot path -------------------------------------------------------------------------

    def check(self, canonical_url: str) -> str | None:
        """None when the URL may be fetched, else the named skip reason: "out_of_scope", "excluded",
        "not_included", "url_too_long", "private_address", "too_many_segments", "repeated_segment" (see
        the module docstring for the order)."""
        if len(canonical_url) > self._max_url_length:
            return URL_TOO_LONG
        # url_host(), inlined on this hot path: "http://" is 7 characters, "https://" 8.
        start = 8 if canonical_url[4] == "s" else 7
        end = canonical_url.find("/", start)
        host = canonical_url[start:end] if end >= 0 else canonical_url[start:]
        verdict = self._host_cache.get(host)
        if verdict is None:
            verdict = self._host_verdict(host)
            if len(self._host_cache) >= HOST_CACHE_SIZE:
                self._host_cache.clear()
            self._host_cache[host] = verdict
        if verdict:
            return verdict
        # the whole URL's slashes ("://" included) bound the path's: most URLs skip the path rules here
        if canonical_url.count("/") >= self._path_slashes and end >= 0:
            reason = self._path_verdict(canonical_url, end)
            if reason:
                return reason
        if self._exclude is not None:
            for pattern in self._exclude:
                if pattern.search(canonical_url):
                    return EXCLUDED
        if self._include is not None:
            for pattern in self._include:
                if pattern.search(canonical_url):
                    return None
            return NOT_INCLUDED
        return None

    def allows(self, canonical_url: str) -> bool:
        """True when `check` finds no reason to skip the URL."""
        return self.check(canonical_url) is None

    def check_many(self, canonical_urls: Iterable[str]) -> list[str | None]:
        """`check` of each URL, in order (one call per page's outlinks)."""
        check = self.check
        return [check(url) for url in canonical_urls]

    def _path_verdict(self, canonical_url: str, start: int) -> str | None:
        """The path rules, for the path that starts at canonical_url[start] (a "/")."""
        stop = canonical_url.find("?", start)
        if stop < 0:
            stop = len(canonical_url)
        if "#" in canonical_url:  # only with canonical.keep_fragment
            at = canonical_url.find("#", start, stop)
            if at >= 0:
                stop = at
        segments = canonical_url[start + 1 : stop].split("/")  # one per "/" of the path
        if self._max_segments is not None and len(segments) > self._max_segments:
            return TOO_MANY_SEGMENTS
        repeats = self._max_repeats
        # r + 1 copies of a segment followed by "/" need at least r + 2 slashes ("/a/a/a/")
        if repeats is not None and len(segments) >= repeats + 2:
            segments.pop()  # the last segment has no "/" after it
            if has_repeated_run(segments, repeats):
                return REPEATED_SEGMENT
        return None

    def _host_verdict(self, host: str) -> str:
        name = split_port(host)[0]
        if not self._any_host and host not in self._hosts and not self._in_domains(name):
            return OUT_OF_SCOPE
        if self.block_private and is_private_host(name):
            return PRIVATE_ADDRESS
        return _OK

    def _in_domains(self, name: str) -> bool:
        domains = self._domains
        if not domains:
            return False
        if name in domains:
            return True
        dot = name.find(".")
        while dot != -1:  # every parent: "a.b.example.com" -> "b.example.com" -> "example.com" -> "com"
            name = name[dot + 1 :]
            if name in domains:
                return True
            dot = name.find(".")
        return False

    # -- plumbing -------------------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        return dict(self._args)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Scope):
            return NotImplemented
        return self._args == other._args

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self._args.items() if v)
        return f"Scope({shown})"
