"""The crawl config's shape: one frozen, keyword-only dataclass per section of crawl.yaml, each checked when built,
its defaults a named constant (DEFAULT_DEDUP = DedupConfig(), ...), and `CrawlConfig` over them all."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from frontier.config.checks import (RESERVED_HEADERS, _as_bool, _as_float, _as_headers, _as_int, _as_path,
                                    _as_str_tuple, check_crawl_name, _check_keys, _check_proxy, _describe, _doc,
                                    _doc_map, _fix, _key, _pairs, _plain_text)
from frontier.errors import ConfigError, InvalidURL
from frontier.url.canonical import DEFAULT_RULES, CanonicalRules, canonicalize, url_host
from frontier.url.scope import (DEFAULT_MAX_PATH_SEGMENTS, DEFAULT_MAX_SEGMENT_REPEATS, DEFAULT_MAX_URL_LENGTH, Scope,
                                normalize_domain, normalize_host)

PROGRESS_MODES = ("auto", "rich", "plain", "off")
MAX_PARTITIONS = 4096
# Worker processes allowed: 4 per CPU, at least 4. A worker runs workers.concurrency fetches at once
# on one core (asyncio), so more processes than cores only helps while they wait on the network, and
# each costs about 100 MB of RAM; past 4 per core a value is a typo (10000 once spawned for 11 minutes).
MAX_WORKER_PROCESSES = max(4, 4 * (os.cpu_count() or 1))
MIN_URL_LENGTH = 16
# limits.max_body_bytes at most: what one page costs a worker grows with its size (link extraction takes up to
# 4x it), and names in the link scanner stay far below 2^31 characters; 1 GiB is Scrapy's DOWNLOAD_MAXSIZE default.
MAX_BODY_BYTES = 1 << 30
# politeness.delay when none is given: the adaptive delay's floor, one request per host per second at most
DEFAULT_DELAY = 1.0
LOG_FILE_NAME = "crawl.jsonl"


@dataclass(frozen=True, kw_only=True, slots=True)
class AuthConfig:
    """HTTP basic auth for one host (a value of workers.auth): `password`, or `password_env` naming the
    environment variable that holds it (read when the config is built, in the supervisor, and again in each
    worker). The password is left out of repr."""

    _SECTION: ClassVar[str] = "workers.auth"
    user: str = ""
    password: str | None = field(default=None, repr=False)
    password_env: str | None = None

    def __post_init__(self) -> None:
        _plain_text(self.user, _key(self, "user"), "a user name")
        if ":" in self.user:
            raise ConfigError("a basic-auth user name cannot contain ':'", key=_key(self, "user"))
        if (self.password is None) == (self.password_env is None):
            raise ConfigError("give password or password_env (one of them)", key=_key(self, "password"))
        if self.password is not None and not isinstance(self.password, str):
            raise ConfigError(f"expected a string, got a {type(self.password).__name__}", key=_key(self, "password"))
        if self.password_env is not None:
            _plain_text(self.password_env, _key(self, "password_env"), "an environment variable name")
            self.secret()

    def secret(self) -> str:
        """The password (from the environment for password_env)."""
        if self.password is not None:
            return self.password
        assert self.password_env is not None
        value = os.environ.get(self.password_env)
        if value is None:
            raise ConfigError(f"the environment variable {self.password_env} is not set",
                              key=_key(self, "password_env"))
        return value


def _as_auth(value: Any, key: str) -> tuple[tuple[str, AuthConfig], ...]:
    auth: dict[str, AuthConfig] = {}
    for host, entry in _pairs(value, key, "hosts to {user, password}"):
        where = f"{key}.{host}"
        try:
            name = normalize_host(host)
        except (ValueError, TypeError) as exc:
            raise ConfigError(str(exc), key=where) from None
        if name in auth:
            raise ConfigError(f"the host {name} is given twice", key=where)
        if isinstance(entry, Mapping):
            _check_keys(entry, [f.name for f in dataclasses.fields(AuthConfig)], prefix=f"{where}.")
            try:
                entry = AuthConfig(**entry)
            except ConfigError as exc:  # the same message under the host's dotted key
                field_key = exc.key or ""
                message = str(exc)[len(field_key) + 2:] if field_key else str(exc)
                raise ConfigError(message, key=f"{where}.{field_key.rpartition('.')[2]}") from None
        if not isinstance(entry, AuthConfig):
            raise ConfigError(f"expected a mapping {{user, password}}, got {_describe(entry)}", key=where)
        auth[name] = entry
    return tuple(auth.items())


# -- the sections ----------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class ScopeConfig:
    """Which URLs may be fetched; `frontier.url.scope.Scope` applies it (`max_depth` is the frontier's)."""

    _SECTION: ClassVar[str] = "scope"
    allowed_hosts: tuple[str, ...] = _doc(
        (), 'Exact hosts, "host" or "host:port" (default ports 80/443 dropped). With allowed_domains '
            "also empty, the seeds' hosts.")
    allowed_domains: tuple[str, ...] = _doc(
        (), 'Domains admitted with all their subdomains, on any port ("example.com" admits '
            '"www.example.com", not "evilexample.com"). "*" admits every host.')
    max_depth: int | None = _doc(
        50, "Links followed from a seed (hops; seeds are depth 0); null: no limit. Stops link chains that "
            "never end (calendars) on sites deeper than any real navigation.")
    include: tuple[str, ...] = _doc(
        (), "Regexes (re.search on the canonical URL); if any are given, a URL must match one.")
    exclude: tuple[str, ...] = _doc((), "Regexes; a URL matching any of them is skipped.")
    block_private: bool = _doc(
        False, "Refuse localhost and private/loopback/link-local/reserved IP literals (no DNS lookup).")
    max_path_segments: int | None = _doc(
        DEFAULT_MAX_PATH_SEGMENTS, "Refuse URLs whose path has more segments (too_many_segments); 0 or null: no "
                                   "limit. Heritrix's default; relative-link loops and mirrors grow the path.")
    max_segment_repeats: int | None = _doc(
        DEFAULT_MAX_SEGMENT_REPEATS, 'Refuse a path where a run of segments repeats back to back more often '
                                     '("/a/a/a/", repeated_segment); 0 or null: no limit. Heritrix\'s default.')

    def __post_init__(self) -> None:
        for name, normalise in (("allowed_hosts", normalize_host), ("allowed_domains", normalize_domain)):
            key = _key(self, name)
            entries = []
            for i, entry in enumerate(_as_str_tuple(getattr(self, name), key)):
                try:
                    entries.append(normalise(entry))
                except ValueError as exc:
                    raise ConfigError(str(exc), key=f"{key}[{i}]") from None
            object.__setattr__(self, name, tuple(dict.fromkeys(entries)))
        _fix(self, "max_depth", _as_int, minimum=0, optional=True)
        for name in ("include", "exclude"):
            key = _key(self, name)
            patterns = _as_str_tuple(getattr(self, name), key)
            for i, pattern in enumerate(patterns):
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ConfigError(f"bad regular expression {pattern!r}: {exc}", key=f"{key}[{i}]") from None
            object.__setattr__(self, name, patterns)
        _fix(self, "block_private", _as_bool)
        _fix(self, "max_path_segments", _as_int, minimum=0, optional=True)
        _fix(self, "max_segment_repeats", _as_int, minimum=0, optional=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class LimitsConfig:
    """Caps on the crawl and on each page."""

    _SECTION: ClassVar[str] = "limits"
    max_pages: int | None = _doc(None, "Stop after this many pages fetched; null: no limit.")
    max_pages_per_host: int | None = _doc(
        100_000, "At most this many pages per host; null: no limit. A budget no real site's crawl should "
                 "meet, so that a trap the other defences miss still ends.")
    max_url_length: int = _doc(DEFAULT_MAX_URL_LENGTH, "Longer canonical URLs are skipped (url_too_long).")
    max_body_bytes: int = _doc(32 * 1024 * 1024, "A response body past this many bytes is cut off (too_large); "
                               "at most 1 GiB (MAX_BODY_BYTES).")
    max_redirects: int = _doc(10, "Redirect hops followed from one URL.")
    max_retries: int = _doc(3, "Retries (with backoff) of a failed fetch before it is given up.")
    max_links_per_page: int = _doc(6000, "Outlinks kept from one page; the rest are dropped (Heritrix's default).")

    def __post_init__(self) -> None:
        _fix(self, "max_pages", _as_int, minimum=1, optional=True)
        _fix(self, "max_pages_per_host", _as_int, minimum=1, optional=True)
        _fix(self, "max_url_length", _as_int, minimum=MIN_URL_LENGTH)
        _fix(self, "max_body_bytes", _as_int, minimum=1, maximum=MAX_BODY_BYTES)
        _fix(self, "max_redirects", _as_int, minimum=0)
        _fix(self, "max_retries", _as_int, minimum=0)
        _fix(self, "max_links_per_page", _as_int, minimum=0)


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkersConfig:
    """The fetch processes."""

    _SECTION: ClassVar[str] = "workers"
    processes: int = _doc(2, "Worker processes (each runs its own event loop and HTTP session); at most 4 per CPU.")
    concurrency: int = _doc(64, "Fetches in flight per worker process.")
    timeout: float = _doc(30.0, "Seconds allowed for one whole fetch (connect, headers, body).")
    connect_timeout: float = _doc(10.0, "Seconds allowed to connect.")
    lease_timeout: float = _doc(
        120.0, "Seconds before a URL handed to a worker without result goes back to its queue; > timeout.")
    headers: tuple[tuple[str, str], ...] = _doc_map(
        "Extra request headers {Name: value} sent to every host (robots.txt and sitemaps included); the "
            "ones the fetcher sets itself are refused: " + ", ".join(sorted(RESERVED_HEADERS)) + ".")
    proxy: str | None = _doc(
        None, 'HTTP proxy every request goes through, "http://[user:password@]host:port"; null: none. '
              "Environment proxies (HTTP_PROXY, ...) are never used.")
    cookies: bool = _doc(
        False, "Keep cookies per host (host:port: a cookie set by one host is sent to no other), in memory, "
               "per worker process.")
    auth: tuple[tuple[str, AuthConfig], ...] = _doc_map(
        'HTTP basic auth per host: {"host" or "host:port": {user: ..., password: ... or password_env: '
            "VAR}}; sent only to that host (not after a redirect to another) and never logged.")

    def __post_init__(self) -> None:
        _fix(self, "processes", _as_int, minimum=1)
        if self.processes > MAX_WORKER_PROCESSES:
            raise ConfigError(
                f"must be <= {MAX_WORKER_PROCESSES} (4 per CPU: each worker already runs workers.concurrency "
                f"fetches at once, and costs about 100 MB of RAM), got {self.processes}", key=_key(self, "processes"))
        _fix(self, "concurrency", _as_int, minimum=1)
        _fix(self, "timeout", _as_float, above=0.0)
        _fix(self, "connect_timeout", _as_float, above=0.0)
        _fix(self, "lease_timeout", _as_float, above=0.0)
        if self.lease_timeout <= self.timeout:
            raise ConfigError(
                f"must be greater than workers.timeout ({self.timeout:g}), else slow fetches are handed "
                f"out twice; got {self.lease_timeout:g}", key=_key(self, "lease_timeout"))
        object.__setattr__(self, "headers", _as_headers(self.headers, _key(self, "headers")))
        if self.proxy is not None:
            _check_proxy(self.proxy, _key(self, "proxy"))
        _fix(self, "cookies", _as_bool)
        object.__setattr__(self, "auth", _as_auth(self.auth, _key(self, "auth")))


@dataclass(frozen=True, kw_only=True, slots=True)
class PolitenessConfig:
    """How gently each host is treated."""

    _SECTION: ClassVar[str] = "politeness"
    delay: float | None = _doc(
        None, "Seconds from a host's result to its next fetch; 0: none (your own servers, benchmarks). With "
              "adaptive, the floor of the adaptive delay. null: 1.0 and adaptive.")
    adaptive: bool | None = _doc(
        None, "AutoThrottle-like: after each result the host waits delay_factor x the server's latency (time "
              "to the response headers), at least delay and at most max_delay. null: true unless delay is given.")
    delay_factor: float = _doc(
        5.0, "Adaptive delay per second of latency: 5 keeps one fetch at a time busy with a server at most "
             "1/6 of the time (Heritrix's delayFactor).")
    max_delay: float = _doc(30.0, "Cap in seconds on the adaptive delay.")
    max_per_host: int = _doc(
        8, "Fetches in flight per host. It also caps the whole crawl at hosts x max_per_host in flight, "
           "whatever workers.concurrency says: a one-site crawl runs 8 fetches at a time.")
    obey_robots: bool = _doc(True, "Fetch robots.txt per host and skip what it disallows.")
    user_agent: str = _doc("frontier/0.1", "User-Agent header, also the name matched in robots.txt.")
    robots_ttl: float = _doc(86400.0, "Seconds a host's robots.txt is cached.")
    max_crawl_delay: float = _doc(30.0, "Cap in seconds on a robots.txt Crawl-delay (or Retry-After).")
    honor_nofollow: bool = _doc(True, 'Drop links marked rel="nofollow" and pages with meta robots nofollow.')
    host_turn: int | None = _doc(
        3000, "Fetches a host gets in a row while other hosts are ready; then it goes behind them (Heritrix's "
              "balanceReplenishAmount). null: no turns.")

    def __post_init__(self) -> None:
        explicit = self.delay is not None
        object.__setattr__(self, "delay", _as_float(self.delay, _key(self, "delay"), minimum=0.0) if explicit
                           else DEFAULT_DELAY)
        if self.adaptive is None:
            object.__setattr__(self, "adaptive", not explicit)
        _fix(self, "adaptive", _as_bool)
        _fix(self, "delay_factor", _as_float, above=0.0)
        _fix(self, "max_delay", _as_float, minimum=0.0)
        if self.adaptive and self.delay <= 0:
            raise ConfigError("must be > 0 with politeness.adaptive: true (it is the adaptive delay's floor, and a "
                              "delay keeps one fetch per host at a time); for no delay set adaptive: false",
                              key=_key(self, "delay"))
        if self.adaptive and self.max_delay < self.delay:
            raise ConfigError(f"must be >= politeness.delay ({self.delay:g}), got {self.max_delay:g}",
                              key=_key(self, "max_delay"))
        _fix(self, "max_per_host", _as_int, minimum=1)
        _fix(self, "obey_robots", _as_bool)
        if not isinstance(self.user_agent, str) or not self.user_agent.strip():
            raise ConfigError(f"expected a non-empty string, got {_describe(self.user_agent)}",
                              key=_key(self, "user_agent"))
        if any(ord(c) < 32 or ord(c) == 127 for c in self.user_agent):
            raise ConfigError("must not contain control characters (it is sent as an HTTP header)",
                              key=_key(self, "user_agent"))
        _fix(self, "robots_ttl", _as_float, minimum=0.0)
        _fix(self, "max_crawl_delay", _as_float, minimum=0.0)
        _fix(self, "honor_nofollow", _as_bool)
        _fix(self, "host_turn", _as_int, minimum=1, optional=True)

    @property
    def host_cap(self) -> str:
        """What bounds one host's fetch rate, as the key to change: "politeness.delay 1.0 s adaptive" (a delay
        means one fetch at a time), else "politeness.max_per_host 8". The banner and the progress line say it."""
        if self.delay > 0:
            return f"politeness.delay {self.delay} s" + (" adaptive" if self.adaptive else "")
        return f"politeness.max_per_host {self.max_per_host}"


SCORERS = ("fifo", "inlinks", "opic")  # frontier.crawl.ordering
DEFAULT_SCORER = "fifo"
REVISIT_ADAPTIVE = ("poisson", "nutch", "off")  # frontier.crawl.revisit


@dataclass(frozen=True, kw_only=True, slots=True)
class OrderingConfig:
    """Which URL next (frontier.crawl.ordering)."""

    _SECTION: ClassVar[str] = "ordering"
    scorer: str = _doc(DEFAULT_SCORER, "Priority of each queued URL: fifo (breadth-first per host), inlinks (links "
                                       "seen to it), opic (a page's importance cash split among its links), or "
                                       "'package.module:callable' (frontier.crawl.ordering.Scorer).")

    def __post_init__(self) -> None:
        name = self.scorer
        if not isinstance(name, str) or not (name in SCORERS or ":" in name.strip(":")):
            raise ConfigError(f"expected one of {', '.join(SCORERS)} or 'package.module:callable', got "
                              f"{_describe(name)}", key=_key(self, "scorer"))


@dataclass(frozen=True, kw_only=True, slots=True)
class RevisitConfig:
    """When again (frontier.crawl.revisit): a schedule per fetched URL, conditional GET, adaptive intervals."""

    _SECTION: ClassVar[str] = "revisit"
    after: float | None = _doc(None, "Seconds after a page's fetch when it is due again, queued by its own schedule "
                                     "(the first interval, unless adaptive and a sitemap's changefreq or lastmod gives one; adaptive changes "
                                     "it per URL); null: one pass, no revisits.")
    continuous: bool = _doc(False, "Keep running and wait for the next due page; false: a run ends when nothing is "
                                   "due now (run it again later for the next pass).")
    conditional: bool = _doc(True, "Send If-None-Match / If-Modified-Since with the last response's ETag and "
                                   "Last-Modified: a 304 is outcome not_modified (fetched, unchanged).")
    adaptive: str = _doc("poisson", "How each URL's interval adapts, within min_after and max_after: poisson (its "
                                    "change rate estimated from its visits, the interval that maximises freshness "
                                    "per fetch), nutch (Nutch's AdaptiveFetchSchedule: unchanged x (1 + inc_rate), "
                                    "changed x (1 - dec_rate)) or off (always after); true: poisson, false: off.")
    min_after: float = _doc(60.0, "Shortest interval in seconds (adaptive).")
    max_after: float = _doc(7_776_000.0, "Longest interval in seconds (90 days, Nutch's default).")
    inc_rate: float = _doc(0.4, "Unchanged: interval x (1 + inc_rate) (adaptive: nutch).")
    dec_rate: float = _doc(0.2, "Changed: interval x (1 - dec_rate) (adaptive: nutch).")

    def __post_init__(self) -> None:
        _fix(self, "after", _as_float, above=0.0, optional=True)
        _fix(self, "continuous", _as_bool)
        _fix(self, "conditional", _as_bool)
        adaptive = "poisson" if self.adaptive is True else "off" if self.adaptive is False else self.adaptive
        if adaptive not in REVISIT_ADAPTIVE:
            raise ConfigError(f"expected one of {', '.join(REVISIT_ADAPTIVE)}, true or false, got "
                              f"{_describe(self.adaptive)}", key=_key(self, "adaptive"))
        object.__setattr__(self, "adaptive", adaptive)
        _fix(self, "min_after", _as_float, above=0.0)
        _fix(self, "max_after", _as_float, above=0.0)
        _fix(self, "inc_rate", _as_float, above=0.0)
        _fix(self, "dec_rate", _as_float, above=0.0, below=1.0)
        if self.max_after < self.min_after:
            raise ConfigError(f"must be >= revisit.min_after ({self.min_after:g}), got {self.max_after:g}",
                              key=_key(self, "max_after"))
        if self.continuous and self.after is None:
            raise ConfigError("needs revisit.after (seconds until a fetched page is due again)",
                              key=_key(self, "continuous"))

    @property
    def enabled(self) -> bool:
        return self.after is not None


@dataclass(frozen=True, kw_only=True, slots=True)
class TrapsConfig:
    """Crawler-trap detection (frontier.crawl.traps): URL patterns that keep producing new near-duplicate pages and
    nothing else, and soft 404s. A suspected URL is queued low, never dropped."""

    _SECTION: ClassVar[str] = "traps"
    patterns: bool = _doc(True, "Suspect a host's URL pattern (numbers and ids folded: /cal/N/N, /search?page&q) "
                                "that keeps growing: over its last 16 pages each found new URLs of it and its "
                                "queue did not shrink. Its new URLs go to the host's low band (trap_pattern); "
                                "a pattern that converges is cleared.")
    soft_404: bool = _doc(True, "Fetch one never-linked path per host; a page whose text and links match its "
                                "answer when it is a 200 is a soft 404: its links go to the low queue (soft_404).")
    max_suspect_pages: int | None = _doc(500, "Low-band URLs fetched at most per suspected (host, pattern) while it "
                                              "keeps growing; the rest are parked for the run and reported "
                                              "(export --what suspected). null: no limit.")
    release: tuple[str, ...] = _doc((), "Patterns never suspected, each \"PATTERN\" or \"HOST PATTERN\" as the "
                                        "summary prints them: the next run fetches what was parked of them.")
    min_pages: int = _doc(8, "Alike pages in a row (with dup_share): evidence that suspects a growing pattern "
                             "after one window instead of four.")
    dup_share: float = _doc(0.8, "Share of min_pages that must be near-duplicates in a row.")
    near_dup_bits: int = _doc(16, "Near-duplicates: simhashes at most this many of 64 bits apart ...")
    near_dup_words: int = _doc(20, "... and about this many words of their own at most.")
    max_patterns_per_host: int = _doc(128, "Patterns remembered per host (about 300 bytes each); the least "
                                           "recently seen non-trap pattern is forgotten first.")

    def __post_init__(self) -> None:
        _fix(self, "patterns", _as_bool)
        _fix(self, "soft_404", _as_bool)
        if self.max_suspect_pages is not None:
            _fix(self, "max_suspect_pages", _as_int, minimum=0, maximum=2**40)
        _fix(self, "release", _as_str_tuple)
        _fix(self, "min_pages", _as_int, minimum=2, maximum=1_000_000)
        _fix(self, "dup_share", _as_float, above=0.0)
        if self.dup_share > 1:
            raise ConfigError(f"must be <= 1, got {self.dup_share:g}", key=_key(self, "dup_share"))
        _fix(self, "near_dup_bits", _as_int, minimum=0, maximum=64)
        _fix(self, "near_dup_words", _as_int, minimum=0, maximum=1_000_000)
        _fix(self, "max_patterns_per_host", _as_int, minimum=1, maximum=65535)

    @property
    def enabled(self) -> bool:
        """Either defence is on: the frontier keeps a TrapDetector (and asks workers for the sketches it needs)."""
        return self.patterns or self.soft_404


@dataclass(frozen=True, kw_only=True, slots=True)
class DedupConfig:
    """The seen-test: shared Bloom filter, LRU of recent fingerprints, exact LMDB confirmation."""

    _SECTION: ClassVar[str] = "dedup"
    capacity: int = _doc(10_000_000, "URLs the Bloom filter is sized for (it grows past this, keeping the rate).")
    error_rate: float = _doc(1.0e-4, "Target false-positive rate of the Bloom filter, 0 < p < 1.")
    exact: bool = _doc(True, 'Confirm every Bloom "maybe seen" in the LMDB log; false: trust the filter.')
    lru_size: int = _doc(65536, "Recent fingerprints kept in the LRU in front of the filter; 0: none.")
    partitions: int = _doc(64, "Lock partitions of the shared filter: a power of two, 1 to 4096; each holds "
                               "under 2^28 bits (a capacity past about 650M URLs at 1e-4 needs more; the "
                               "error names the minimum).")
    deletable: bool = _doc(False, "A counting Bloom filter (4x the memory) so that URLs can be forgotten "
                                  "(recrawl) in probabilistic mode too; exact mode deletes without it.")
    whitelist: Path | None = _doc(None, 'File of URLs (one a line; blank lines and # comments skipped) never '
                                        'dropped as seen by a false positive in probabilistic mode: their Bloom '
                                        '"maybe" is confirmed in the log (seeds always are).')
    recrawl_after: float | None = _doc(None, "Seconds after a page's fetch from which a link to it queues it "
                                             "again (a recrawl); null: never. revisit.after replaces it (every "
                                             "page comes back on its own schedule; not both).")
    blocked: bool = _doc(False, "Keep each URL's bits in one 64-byte block of the shared filter: one cache line a "
                                "check-and-add instead of k (several times faster once the filter outgrows the "
                                "CPU caches) for about 18% more memory; not with deletable. LMDB storage.")
    defer_confirms: int = _doc(262_144, 'Exact mode: a Bloom "maybe" that memory cannot answer is parked, and a sweep '
                                        "answers the parked ones together once this many wait (or the crawl runs out "
                                        "of work): one forward pass over the log's runs instead of a random page read "
                                        "each; 0: confirm each at once. Not with recrawl_after. LMDB storage.")

    def __post_init__(self) -> None:
        _fix(self, "capacity", _as_int, minimum=1)
        _fix(self, "error_rate", _as_float, above=0.0, below=1.0)
        _fix(self, "exact", _as_bool)
        _fix(self, "lru_size", _as_int, minimum=0)
        _fix(self, "partitions", _as_int, minimum=1, maximum=MAX_PARTITIONS)
        _fix(self, "deletable", _as_bool)
        _fix(self, "whitelist", _as_path, optional=True)
        _fix(self, "recrawl_after", _as_float, above=0.0, optional=True)
        _fix(self, "blocked", _as_bool)
        _fix(self, "defer_confirms", _as_int, minimum=0)
        if self.blocked and self.deletable:
            raise ConfigError("the counting filter (deletable: true) has no blocked layout", key=_key(self, "blocked"))
        if self.partitions & (self.partitions - 1):
            raise ConfigError(f"must be a power of two, got {self.partitions}", key=_key(self, "partitions"))


@dataclass(frozen=True, kw_only=True, slots=True)
class RedisStorageConfig:
    """The Redis or Valkey server (or Cluster) that holds a crawl shared by many frontier instances. The URL's
    remaining checks (a remote server needs a password) run when it is used (frontier.state.redis_conn)."""

    _SECTION: ClassVar[str] = "storage.redis"
    url: str | tuple[str, ...] = _doc("redis://127.0.0.1:6379/0", "redis://[user:password@]host:port/db, "
                                      "rediss:// (TLS) or unix://; for a Cluster, any node, or a list of startup "
                                      "nodes (the first that answers is used; any may be down).")
    cluster: bool | str = _doc("auto", "auto (ask the server), true (a Redis Cluster) or false.")
    crawl: str = _doc("crawl", "The crawl's name: the key prefix; one server holds several crawls side by side.")
    allow_unauthenticated: bool = _doc(False, "Accept a server not on this machine without a password.")
    allow_plaintext: bool = _doc(False, "Accept a password over plain redis:// to a server (or a Cluster node) not "
                                        "on this machine; else use rediss:// (TLS).")
    give_up_after: float = _doc(60.0, "Seconds of the server unreachable (retried with backoff) before the "
                                      "instance exits with an error.")

    def __post_init__(self) -> None:
        if isinstance(self.url, (list, tuple)) and self.url:
            object.__setattr__(self, "url", tuple(self.url))
        for url in (self.url if isinstance(self.url, tuple) else (self.url,)):
            if not isinstance(url, str) or url.partition("://")[0] not in ("redis", "rediss", "unix"):
                raise ConfigError(f"expected a redis://, rediss:// or unix:// URL or a list of them, got "
                                  f"{_describe(self.url)}", key=_key(self, "url"))
        if self.cluster not in (True, False, "auto"):
            raise ConfigError(f"expected auto, true or false, got {_describe(self.cluster)}", key=_key(self, "cluster"))
        check_crawl_name(self.crawl)
        _fix(self, "allow_unauthenticated", _as_bool)
        _fix(self, "allow_plaintext", _as_bool)
        _fix(self, "give_up_after", _as_float, minimum=0.0)


DEFAULT_REDIS = RedisStorageConfig()
STORAGE_BACKENDS = ("lmdb", "redis")


@dataclass(frozen=True, kw_only=True, slots=True)
class StorageConfig:
    """Where the crawl's durable state lives."""

    _SECTION: ClassVar[str] = "storage"
    backend: str = _doc("lmdb", "lmdb (this machine's data_dir) or redis (a crawl shared by many instances).")
    data_dir: Path = _doc(Path("crawl-data"), "Directory of the LMDB env, Bloom snapshot and crawl log (with "
                                              "backend redis: this instance's crawl log and run records).")
    fsync: bool = _doc(False, "Sync LMDB to disk on every commit (safe against power loss, slower).")
    redis: RedisStorageConfig = _doc(DEFAULT_REDIS, "The server of backend redis, a mapping of keys:")

    def __post_init__(self) -> None:
        if self.backend not in STORAGE_BACKENDS:
            raise ConfigError(f"expected one of {', '.join(STORAGE_BACKENDS)}, got {_describe(self.backend)}",
                              key=_key(self, "backend"))
        _fix(self, "data_dir", _as_path)
        _fix(self, "fsync", _as_bool)
        redis = {} if self.redis is None else self.redis
        if isinstance(redis, Mapping):
            _check_keys(redis, [f.name for f in dataclasses.fields(RedisStorageConfig)], prefix="storage.redis.")
            redis = RedisStorageConfig(**redis)
        if not isinstance(redis, RedisStorageConfig):
            raise ConfigError(f"expected a mapping of keys, got {_describe(redis)}", key=_key(self, "redis"))
        object.__setattr__(self, "redis", redis)


@dataclass(frozen=True, kw_only=True, slots=True)
class OutputConfig:
    """What the crawl writes besides its state, and what it shows."""

    _SECTION: ClassVar[str] = "output"
    log: Path | None = _doc(None, "JSON-lines log of every fetch; null: <data_dir>/crawl.jsonl.")
    warc: Path | None = _doc(
        None, "WARC output of fetched responses, one file per worker process: crawl.warc.gz is written as "
              "crawl-w0.warc.gz, crawl-w1.warc.gz, ...; null: none written.")
    progress: str = _doc("auto", 'Progress display: auto (rich on a TTY, else plain), rich, plain, "off".')
    progress_interval: float = _doc(2.0, "Seconds between progress updates.")
    metrics: str | None = _doc(None, 'host:port the frontier process serves Prometheus metrics on, e.g. '
                                     '"127.0.0.1:9410" (frontier.crawl.metrics); null: off.')

    def __post_init__(self) -> None:
        if self.metrics is not None:
            from frontier.config.checks import split_address

            split_address(self.metrics)  # ConfigError naming output.metrics
        _fix(self, "log", _as_path, optional=True)
        _fix(self, "warc", _as_path, optional=True)
        progress = self.progress
        if progress is False:  # YAML 1.1 reads a bare `off` as false
            progress = "off"
        if progress not in PROGRESS_MODES:
            raise ConfigError(f"expected one of {', '.join(PROGRESS_MODES)}, got {_describe(progress)}",
                              key=_key(self, "progress"))
        object.__setattr__(self, "progress", progress)
        _fix(self, "progress_interval", _as_float, above=0.0)


@dataclass(frozen=True, kw_only=True, slots=True)
class ConsoleConfig:
    """The operator's console the frontier process serves (frontier.console): a live page, a JSON API, reports.
    Off loopback it needs a token, and TLS or `insecure: true` (the rule `frontier serve` follows too)."""

    _SECTION: ClassVar[str] = "console"
    enabled: bool = _doc(True, "Serve the console while the crawl runs.")
    listen: str = _doc("127.0.0.1:0", 'host:port to serve on; port 0: a free port, shown in the banner and written '
                                      'to <data_dir>/console.json.')
    token: str | None = field(default=None, repr=False, metadata={
        "doc": "The bearer token API calls must send (Authorization: Bearer TOKEN); null: a random one per run, "
               "written only to console.json (mode 0600)."})
    token_file: Path | None = _doc(None, "A file holding the token (its first line), instead of `token`.")
    tls_cert: Path | None = _doc(None, "PEM certificate chain: serve HTTPS (with tls_key).")
    tls_key: Path | None = _doc(None, "PEM private key of tls_cert.")
    insecure: bool = _doc(False, "Serve a non-loopback address without TLS (the token is still required).")

    def __post_init__(self) -> None:
        from frontier.config.checks import bind_needs, split_address

        _fix(self, "enabled", _as_bool)
        _fix(self, "insecure", _as_bool)
        host, _ = split_address(self.listen, _key(self, "listen"), ephemeral=True)
        if self.token is not None:
            _plain_text(self.token, _key(self, "token"), "a token")
        if self.token is not None and self.token_file is not None:
            raise ConfigError("give token or token_file, not both", key=_key(self, "token_file"))
        for name in ("token_file", "tls_cert", "tls_key"):
            _fix(self, name, _as_path, optional=True)
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ConfigError("give tls_cert and tls_key together", key=_key(self, "tls_key"))
        if self.token_file is not None:
            self.secret()
        # `insecure` waives TLS only: off loopback the console always needs a token
        needs = bind_needs(host, tls=self.tls_cert is not None or self.insecure, allow_insecure=False,
                           token=self.token or ("file" if self.token_file is not None else None))
        if self.enabled and needs:
            missing = " and ".join(text for what, text in (
                ("token", "a token (console.token or console.token_file)"),
                ("tls", "TLS (console.tls_cert, console.tls_key) or console.insecure: true")) if what in needs)
            raise ConfigError(f"{host} is not a loopback address: the console there needs {missing}",
                              key=_key(self, "listen"))

    def secret(self) -> str | None:
        """The configured token (token_file's first line), None when none is configured."""
        if self.token_file is None:
            return self.token
        try:
            with open(self.token_file, encoding="utf-8") as f:
                token = f.readline().strip()
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"cannot read {self.token_file}: {getattr(e, 'strerror', None) or e}",
                              key=_key(self, "token_file")) from None
        if not token:
            raise ConfigError(f"{self.token_file} holds no token", key=_key(self, "token_file"))
        return token


@dataclass(frozen=True, kw_only=True, slots=True)
class DemoConfig:
    """A generated mock web that run_frontier starts on loopback and crawls (seeds and hosts filled in)."""

    _SECTION: ClassVar[str] = "demo"
    pages: int = _doc(3000, "Pages in the mock web, spread over the hosts.")
    hosts: int = _doc(3, "Mock hosts (one loopback port each).")
    links_per_page: int = _doc(20, "Links on each mock page.")
    seed: int = _doc(1, "Random seed: the same seed gives the same web.")
    hostile: bool = _doc(False, "Add traps: slow, huge, redirect-looping, erroring and malformed pages.")

    def __post_init__(self) -> None:
        _fix(self, "pages", _as_int, minimum=1)
        _fix(self, "hosts", _as_int, minimum=1)
        _fix(self, "links_per_page", _as_int, minimum=0)
        _fix(self, "seed", _as_int)
        _fix(self, "hostile", _as_bool)
        if self.hosts > self.pages:
            raise ConfigError(f"must be <= demo.pages ({self.pages}), got {self.hosts}", key=_key(self, "hosts"))


DEFAULT_SCOPE = ScopeConfig()
DEFAULT_LIMITS = LimitsConfig()
DEFAULT_WORKERS = WorkersConfig()
DEFAULT_POLITENESS = PolitenessConfig()
DEFAULT_TRAPS = TrapsConfig()
DEFAULT_ORDERING = OrderingConfig()
DEFAULT_REVISIT = RevisitConfig()
DEFAULT_DEDUP = DedupConfig()
# frontier.url.canonical owns the rules; a crawl strips session ids by default (Heritrix does too: a new id on every
# link makes every page of a site new again), while canonicalize() itself keeps its plain DEFAULT_RULES
DEFAULT_CANONICAL = dataclasses.replace(DEFAULT_RULES, strip_session_ids=True)
DEFAULT_STORAGE = StorageConfig()
DEFAULT_OUTPUT = OutputConfig()
DEFAULT_CONSOLE = ConsoleConfig()
DEFAULT_DEMO = DemoConfig()

# Section name -> class, in the order of crawl.yaml. `canonical` is frontier.url.canonical's CanonicalRules.
_SECTIONS: dict[str, type] = {
    "scope": ScopeConfig,
    "limits": LimitsConfig,
    "workers": WorkersConfig,
    "politeness": PolitenessConfig,
    "traps": TrapsConfig,
    "ordering": OrderingConfig,
    "revisit": RevisitConfig,
    "dedup": DedupConfig,
    "canonical": CanonicalRules,
    "storage": StorageConfig,
    "output": OutputConfig,
    "console": ConsoleConfig,
}
_TOP_KEYS = ("seeds", "seeds_from_sitemaps", *_SECTIONS, "demo")
_SITEMAPS_DOC = ("Also seed from each seed host's sitemaps: its robots.txt Sitemap lines, else /sitemap.xml "
                 "(sitemap indexes and .xml.gz followed); their URLs are queued at depth 1.")

_CANONICAL_DOCS = {
    "sort_query": "Sort query parameters by name (stable for equal names).",
    "strip_session_ids": "Drop session-id parameters (jsessionid, phpsessid, sid, ...).",
    "strip_tracking": "Drop tracking parameters (utm_*, gclid, fbclid, ...).",
    "keep_fragment": "Keep the #fragment (normally dropped: it never reaches the server).",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class CrawlConfig:
    """One crawl's whole configuration. Build it with `load_config(dict)` or directly."""

    seeds: tuple[str, ...] = ()
    seeds_from_sitemaps: bool = False
    scope: ScopeConfig = DEFAULT_SCOPE
    limits: LimitsConfig = DEFAULT_LIMITS
    workers: WorkersConfig = DEFAULT_WORKERS
    politeness: PolitenessConfig = DEFAULT_POLITENESS
    traps: TrapsConfig = DEFAULT_TRAPS
    ordering: OrderingConfig = DEFAULT_ORDERING
    revisit: RevisitConfig = DEFAULT_REVISIT
    dedup: DedupConfig = DEFAULT_DEDUP
    canonical: CanonicalRules = DEFAULT_CANONICAL
    storage: StorageConfig = DEFAULT_STORAGE
    output: OutputConfig = DEFAULT_OUTPUT
    console: ConsoleConfig = DEFAULT_CONSOLE
    demo: DemoConfig | None = None

    def __post_init__(self) -> None:
        for name, cls in _SECTIONS.items():
            if not isinstance(getattr(self, name), cls):
                raise ConfigError(f"expected a {cls.__name__}, got {_describe(getattr(self, name))}", key=name)
        if self.demo is not None and not isinstance(self.demo, DemoConfig):
            raise ConfigError(f"expected a DemoConfig or None, got {_describe(self.demo)}", key="demo")
        seeds = []
        for i, seed in enumerate(_as_str_tuple(self.seeds, "seeds")):
            try:
                seeds.append(canonicalize(seed, rules=self.canonical))
            except InvalidURL as exc:
                raise ConfigError(f"not a crawlable URL: {exc}", key=f"seeds[{i}]") from None
        object.__setattr__(self, "seeds", tuple(dict.fromkeys(seeds)))
        _as_bool(self.seeds_from_sitemaps, "seeds_from_sitemaps")
        if self.revisit.enabled and self.dedup.recrawl_after is not None:
            raise ConfigError("give revisit.after or dedup.recrawl_after, not both: revisit.after replaces it (every "
                              "fetched page comes back on its own schedule)", key="dedup.recrawl_after")
        if self.seeds:
            scope = Scope.from_config(self)
            for i, seed in enumerate(self.seeds):
                reason = scope.check(seed)
                if reason is not None:
                    raise ConfigError(f"the seed {seed!r} is outside the crawl's scope ({reason}: "
                                      f"{scope.rule_of(reason)})", key=f"seeds[{i}]")

    def require_seeds(self) -> None:
        """ConfigError when there is nothing to crawl (no seed, no demo section). Asked by `crawl` only: `serve`,
        `status`, `export` and `fresh` read the same file, and a service or a report needs no seeds."""
        if not self.seeds and self.demo is None:
            raise ConfigError("give at least one seed URL (or a demo section)", key="seeds")

    def effective_scope(self) -> ScopeConfig:
        """`scope`, or when it names no hosts and no domains, `scope` limited to the seeds' hosts."""
        if self.scope.allowed_hosts or self.scope.allowed_domains or not self.seeds:
            return self.scope
        hosts = tuple(dict.fromkeys(url_host(seed) for seed in self.seeds))
        return dataclasses.replace(self.scope, allowed_hosts=hosts)

    @property
    def log_path(self) -> Path:
        """`output.log`, or `<storage.data_dir>/crawl.jsonl` when that is null."""
        return self.output.log if self.output.log is not None else self.storage.data_dir / LOG_FILE_NAME


