"""What crosses a process queue: one job per URL to fetch, one result per page, sent in batches.

A result always carries a status, a named reason when it is not plain success, and the page's
outlinks as one batch (already canonical and in scope), so the frontier makes one seen-test call
per page. No untyped metadata dicts: every field is named here.

A queue message is a list: the jobs queue carries `JobBatch`es (and one `None` per worker, the
end-of-crawl sentinel), the results queue `ResultBatch`es. Each message costs the sender a pickle
and a pipe write and the receiver a lock, a read and an unpickle: one per job and one per result
were a third of the frontier process's CPU in the crawl benchmark. A message type pickles as its class and its
field values in order (`_pickles_as_fields`): the dataclass default for a slots class calls
`dataclasses.fields()` and a setattr per field in Python on each side, 22 us per result against 11.
"""

from __future__ import annotations

import enum
import operator
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from frontier.crawl.traps import PageSketch


_T = TypeVar("_T")


def _pickles_as_fields(cls: type[_T]) -> type[_T]:
    """`cls` pickled as (cls, its field values in __init__ order): rebuilt by its own __init__."""
    values = operator.attrgetter(*(f.name for f in fields(cls)))  # type: ignore[arg-type]

    def __reduce__(self: Any) -> tuple[type[_T], tuple[Any, ...]]:
        return cls, values(self)

    cls.__reduce__ = __reduce__  # type: ignore[assignment,method-assign]
    return cls


class Status(str, enum.Enum):
    """How a fetch ended: OK (use it), SKIP (do not retry), FAIL (retry with backoff)."""

    OK = "ok"
    SKIP = "skip"
    FAIL = "fail"


# FAIL reasons (workers/fetcher.py) of a fetch that got no HTTP response because the network failed,
# in the plain words a user is told. A seed that ends with one is kept for the next run, and so is
# every URL of a host whose robots.txt ends with one (frontier.crawl); an HTTP 5xx is not one.
NETWORK_ERRORS: dict[str, str] = {
    "connect_error": "connection refused or host unreachable",
    "dns_error": "DNS failure",
    "timeout": "timed out",
    "connection_reset": "connection reset",
    "ssl_error": "TLS handshake failed",
}


@_pickles_as_fields
@dataclass(frozen=True, slots=True)
class FetchJob:
    """A leased URL. `key` is the lease handle: the result echoes the job back so the frontier can ack it.

    Attributes:
        url: the canonical URL to fetch.
        depth: links from a seed (0: a seed).
        key: the lease handle.
        attempt: earlier attempts at this URL.
        redirects: redirects followed to reach it.
        robots: fetch the host's robots.txt instead of a page.
        sitemap: > 0: a sitemap (XML) at this nesting level (1: named by robots.txt).
        sketch: send the page text's sketch (the trap detector needs it).
        etag: a revisit's last ETag, sent as If-None-Match (revisit.conditional).
        last_modified: a revisit's last Last-Modified, sent as If-Modified-Since.
        digest: a revisit's last body digest (an unchanged 200 is told by it).
        captured_at: when the last response was captured (WARC revisit records).
    """

    url: str
    depth: int
    key: bytes
    attempt: int = 0
    redirects: int = 0
    robots: bool = False  # fetch the host's robots.txt instead of a page
    sitemap: int = 0  # > 0: a sitemap (XML) at this nesting level: 1 is named by robots.txt (crawl.sitemaps)
    sketch: bool = False  # send the page text's sketch (frontier.crawl.traps): the trap detector needs it
    # a revisit (frontier.crawl.revisit): the last response's validators, sent as If-None-Match / If-Modified-Since
    # (revisit.conditional), and its body digest and capture time, for the WARC revisit records
    etag: str = ""
    last_modified: str = ""
    digest: bytes = b""
    captured_at: float = 0.0


@_pickles_as_fields
@dataclass(frozen=True, slots=True)
class FetchResult:
    """The outcome of one job.

    `reason` names the error or skip ("http_503", "timeout", "too_large", "not_html", ...) and is
    None only for a plain OK. `outlinks` are canonical, de-duplicated within the page, in scope as
    far as the worker can tell. `redirect_to` is the canonical target of a 3xx; it goes through the
    seen-test and scope like any link. `robots_txt` is the body of a robots job. `sketch`: the simhash of
    an HTML page's text (frontier.crawl.traps), when its job asked for it (else None, as for a page without words).
    `latency`: seconds from sending the request to the response headers (None without a response): what
    the adaptive politeness delay follows (`elapsed` is the whole fetch, body and parsing included).

    Attributes:
        job: the job this answers.
        status: OK, SKIP (do not retry) or FAIL (retry with backoff).
        reason: the error or skip (see above); None for a plain OK.
        http_status: the response's status code (None without a response).
        content_type: the response's media type.
        bytes: the body's size as read.
        elapsed: seconds of the whole fetch.
        fetched_at: when it was fetched (wall clock).
        outlinks: the page's links (see above).
        skipped_links: hrefs the worker dropped: invalid, non-http, out of scope, too long.
        redirect_to: a 3xx's canonical target.
        robots_txt: a robots job's body.
        retry_after: a Retry-After the server sent (seconds).
        worker: the worker process that fetched it.
        known_links: outlinks left out as held by the shared Bloom filter (probabilistic mode).
        sketch: the page text's simhash, when asked for.
        latency: seconds to the response headers.
        sitemaps: a sitemap index's sitemaps.
        first_intervals: a sitemap's first revisit interval per outlink (None: it names none).
        bad_hints: a sitemap's values not understood (ignored).
        priorities: the caller's priority of each outlink (None: the scorer's).
        etag: the response's ETag, exactly as received.
        last_modified: its Last-Modified, exactly as received.
        digest: the first 8 bytes of the body's SHA-1 (a page read whole).
        address: the IP address the fetch connected to (network.resolve's when it names the host; for robots.txt,
            the last redirect hop's; through a proxy, the proxy's); None when no response came.
    """

    job: FetchJob
    status: Status
    reason: str | None = None
    http_status: int | None = None
    content_type: str | None = None
    bytes: int = 0
    elapsed: float = 0.0
    fetched_at: float = 0.0
    outlinks: tuple[str, ...] = ()
    skipped_links: int = 0  # hrefs dropped by the worker: invalid, non-http, out of scope, too long
    redirect_to: str | None = None
    robots_txt: str | None = None
    retry_after: float | None = None
    worker: int = -1
    known_links: int = 0  # outlinks the worker left out because the shared Bloom filter holds them
    # (probabilistic mode only, where the frontier trusts the filter and would drop them too)
    sketch: PageSketch | None = None
    latency: float | None = None
    sitemaps: tuple[str, ...] = ()  # a sitemap index's sitemaps (canonical; a sitemap job's `outlinks` are its pages)
    first_intervals: tuple[float | None, ...] | None = None  # a sitemap's first revisit interval per outlink, from
    # <changefreq> / <lastmod> (workers.sitemaps); None: the file names neither
    bad_hints: int = 0  # a sitemap's <priority>, <changefreq> and <lastmod> values not understood (ignored)
    priorities: tuple[float, ...] | None = None  # the caller's priority of each outlink (frontier.crawl.ordering:
    # it replaces the scorer's); None: the scorer's
    etag: str | None = None  # the response's ETag and Last-Modified headers, exactly as received
    last_modified: str | None = None
    digest: bytes | None = None  # the first 8 bytes of the body's SHA-1 (a page read whole): tells an unchanged 200
    address: str | None = None  # the server's IP address as connected to (the proxy's, through a proxy)


JobBatch = list[FetchJob]  # one jobs-queue message
ResultBatch = list[FetchResult]  # one results-queue message
