"""The fetcher worker: one aiohttp session per process, one FetchResult per FetchJob, never an exception.

Two layers:

    Fetcher(cfg, scope, worker_id=0, known=None)   async context manager; `await f.fetch(job) -> FetchResult`
    run_worker(worker_id, cfg, jobs, results, bloom_name=None, supervisor_pid=None)   the spawned process's target

`Fetcher.fetch` translates everything that can go wrong into a status and a named reason (aiohttp's
errors never cross a queue). The vocabulary:

    status  reason                    when
    OK      None                      2xx HTML page read and parsed; `outlinks` set
    OK      "redirect"                3xx with a Location that canonicalises; `redirect_to` set (scope is
                                      left to the frontier, which checks it like any link)
    OK      "not_html"                2xx that is not HTML (by Content-Type, or by sniffing when absent)
    OK      None / "robots_http_<c>"  robots job: 2xx (`robots_txt` = body) / 4xx (`robots_txt` = "")
    OK      "robots_redirect_loop"    robots job: more than 5 redirects; `robots_txt` = "" (RFC 9309)
    OK      "robots_bad_redirect"     robots job: a Location that does not canonicalise; `robots_txt` = ""
    OK      "sitemap"                 sitemap job: a <urlset>; `outlinks` = its URLs in scope (workers.sitemaps),
                                      `priorities` = their <priority> when the file names any
    OK      "sitemap_index"           sitemap job: a <sitemapindex>; `sitemaps` = its sitemaps in scope
    SKIP    "sitemap_malformed"       sitemap job: bad XML or gzip, DTD entities, another root element
    SKIP    "sitemap_too_large"       sitemap job: over 50 MiB of XML once decompressed (a gzip bomb)
    SKIP    "http_<code>"             4xx except 429; 3xx without Location
    SKIP    "bad_redirect"            3xx whose Location does not canonicalise
    SKIP    "too_large"               decoded body longer than limits.max_body_bytes (no links kept)
    SKIP    "binary_body"             HTML by its headers, but NULs and over 1/32 control bytes in its first 1 KB
    SKIP    "invalid_url"             the job's URL cannot be requested
    SKIP    "ssl_certificate"         the TLS certificate is refused (retrying does not fix it)
    SKIP    "private_address"         scope.block_private, and the host name resolves only to private addresses
    FAIL    "http_<code>"             5xx, and 429; `retry_after` from Retry-After when present
    FAIL    "timeout"                 workers.timeout (whole fetch) or workers.connect_timeout passed
    FAIL    "dns_error"               the host name does not resolve
    FAIL    "connect_error"           refused / unreachable
    FAIL    "ssl_error"               TLS handshake failed (other than the certificate)
    FAIL    "connection_reset"        the server closed or reset the connection, or the body was cut short
    FAIL    "bad_response"            unparseable status line or headers
    FAIL    "bad_encoding"            the body does not decompress per its Content-Encoding
    FAIL    "client_error:<Name>"     any other aiohttp ClientError
    FAIL    "internal_error:<Name>"   a bug: anything else (logged with its traceback)

Bodies are read with automatic decompression off and decoded chunk by chunk with an output cap
(workers.body): a gzip or brotli bomb stops at limits.max_body_bytes + 1 decoded bytes.
`FetchResult.bytes` counts decoded body bytes read. The worker's ends of the job and result queues, between
them and its event loop, are workers.channel.

A page over BIG_PAGE_BYTES is parsed in a thread (link extraction, scope, the Bloom pre-filter), so it
does not stall the worker's other fetches: a 10 MB page with 28,000 links held the event loop for 0.1-0.5 s
(measured; most of its fetch time), parsed in the thread the loop's longest pause is a C call or a garbage
collection that holds the GIL (8 ms on an idle machine, up to about 50 ms under load; lexbor's parse itself
releases the GIL). Smaller pages are parsed on the loop: the thread hop costs more than their parse.

`KnownLinks` (probabilistic mode): links the frontier's shared Bloom filter already holds are left out of
the result (counted in `FetchResult.known_links`); the frontier trusts the filter in that mode and would
drop them anyway. Bits are set only after the frontier commits a batch, so a link found in the filter is
recorded for good. In exact mode a filter hit is only a "maybe" the frontier confirms in LMDB, so nothing
is dropped and the filter is not attached: nor is a miss worth sending as a "certainly new" mark, since
other batches commit between the worker's test and the frontier's, which must test again under its
partition locks; the frontier looks up only its own filter's "maybe"s in LMDB, and its whole filter
test was about 5% of its CPU in the crawl benchmark's profile.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import email.utils
import functools
import logging
import os
import signal
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import aiohttp
from yarl import URL

from frontier.crawl.child import supervised
from frontier.crawl.messages import FetchJob, FetchResult, JobBatch, ResultBatch, Status
from frontier.crawl.revisit import body_digest
from frontier.errors import FrontierError, InvalidURL
from frontier.seen.fingerprint import fingerprints
from frontier.url.canonical import canonicalize, url_host
from frontier.url.scope import Scope, is_private_host
from workers.body import ACCEPT_ENCODING, BadEncoding, decoder_for, looks_binary, looks_html, mime_type, read_body
from workers.channel import ResultSender, read_jobs
from workers.links import HrefCache, ScopeMemo, extract_links
from workers.session import SECRET_HEADERS, RequestOptions
from workers.sitemaps import SitemapError, SitemapReader
from workers.warc import (IDENTICAL_PAYLOAD_PROFILE, NOT_MODIFIED_PROFILE, WarcWriter, payload_digest,
                          worker_warc_path)

if TYPE_CHECKING:
    import multiprocessing

    from frontier.config import CrawlConfig
    from frontier.seen.bloom import SharedBloom

__all__ = ["BIG_PAGE_BYTES", "Fetcher", "KnownLinks", "ROBOTS_MAX_BYTES", "ROBOTS_MAX_REDIRECTS", "parse_retry_after",
           "run_worker"]

log = logging.getLogger(__name__)

ROBOTS_MAX_BYTES = 512 * 1024  # RFC 9309 2.5: parse at least 500 KiB; the rest is ignored
ROBOTS_MAX_REDIRECTS = 5  # RFC 9309 2.3.1.2
DNS_CACHE_SECONDS = 300
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
ACCEPT_HTML = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5"
ACCEPT_ROBOTS = "text/plain,*/*;q=0.5"
ACCEPT_SITEMAP = "application/xml,text/xml;q=0.9,*/*;q=0.5"
# Real sites send big cookies and CSP headers; aiohttp's 8190 default refuses some of them.
MAX_HEADER_FIELD = 32 * 1024
# Bodies larger than this are parsed in a thread. A 43 KB page parses in about 0.3 ms; 256 KB in 2-5 ms,
# about what a hop to a thread and back costs the loop under load.
BIG_PAGE_BYTES = 256 * 1024


# -- small pure helpers --------------------------------------------------------------------------


def conditional_headers(job: FetchJob) -> dict[str, str] | None:
    """If-None-Match / If-Modified-Since from a revisit's stored validators, exactly as the server sent them."""
    if not (job.etag or job.last_modified):
        return None
    headers = {"If-None-Match": job.etag} if job.etag else {}
    if job.last_modified:
        headers["If-Modified-Since"] = job.last_modified
    return headers


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After value (delta-seconds or an HTTP-date); None if absent or bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(int(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT
        from datetime import timezone

        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class _PrivateAddress(OSError):
    """A host name that resolves only to private addresses, with scope.block_private on."""


class _PublicResolver(aiohttp.abc.AbstractResolver):
    """aiohttp's default resolver without private, loopback, link-local or reserved addresses.

    The scope judges a URL's text (IP literals, "localhost"); this sees what a name resolves to,
    right before the connection is made, so neither a name nor a DNS rebinding reaches a private address.
    """

    def __init__(self) -> None:
        self._inner = aiohttp.resolver.DefaultResolver()

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET) -> list[Any]:
        public = [r for r in await self._inner.resolve(host, port, family) if not is_private_host(r["host"])]
        if not public:
            raise _PrivateAddress(f"{host} resolves only to private addresses")
        return public

    async def close(self) -> None:
        await self._inner.close()


# -- the Bloom pre-filter --------------------------------------------------------------------------


BloomName = Callable[[], "str | None"]


class KnownLinks:
    """Splits a page's links into those the frontier's shared Bloom filter may not hold and a count of
    those it holds (probabilistic mode only: see the module docstring).

    `name()` gives the filter's shared-memory name, or None while the frontier process has not published
    it (or has none: a Redis-backed crawl). The filter is attached on first use, read-only and never
    registered with the resource tracker; until then, or if attaching fails, every link is kept (keeping
    a link is always correct: the frontier decides).
    """

    def __init__(self, name: BloomName) -> None:
        self._name = name
        self._bloom: SharedBloom | None = None
        self._failed = False
        # pages are filtered on the loop and in the parse thread; a handle maps the filter's new generations
        # as it meets them, which two threads must not do at once
        self._lock = threading.Lock()

    def _filter(self) -> SharedBloom | None:
        if self._bloom is None and not self._failed:
            name = self._name()
            if name is None:
                return None
            from frontier.seen.bloom import SharedBloom  # numpy: imported only by a worker that filters

            try:
                self._bloom = SharedBloom.attach(name)
            except FrontierError as exc:
                self._failed = True
                log.warning("Bloom pre-filter off: %s", exc)
        return self._bloom

    def split(self, links: list[str]) -> tuple[list[str], int]:
        """(the links to send, how many were left out as known)."""
        if not links:
            return links, 0
        fps = fingerprints(links)
        with self._lock:
            bloom = self._filter()
            if bloom is None:
                return links, 0
            known = bloom.contains_mask(fps).tolist()
        kept = [url for url, k in zip(links, known) if not k]
        return kept, len(links) - len(kept)

    def close(self) -> None:
        with self._lock:
            bloom, self._bloom = self._bloom, None
        if bloom is not None:
            bloom.close()


# -- the fetcher -----------------------------------------------------------------------------------


class Fetcher:
    """Fetches jobs over one aiohttp session; `fetch` never raises (see the module docstring).

    `async with Fetcher(cfg, scope, worker_id) as f: result = await f.fetch(job)`. The session, the parse
    thread for big pages (and the WARC file when `cfg.output.warc` is set) belong to this object; `aclose()`
    is idempotent. `known` leaves out links the shared Bloom filter holds (probabilistic mode).
    """

    def __init__(self, cfg: CrawlConfig, scope: Scope, worker_id: int = 0, known: KnownLinks | None = None) -> None:
        self.cfg = cfg
        self.scope = scope
        self.worker_id = worker_id
        self._rules = cfg.canonical
        self._cap = cfg.limits.max_body_bytes
        self._max_links = cfg.limits.max_links_per_page
        self._hrefs = HrefCache(self._rules)  # links of hrefs met before: most repeat from page to page
        self._in_scope = ScopeMemo(self._verdict)  # and so do their scope verdicts
        self._max_url_length = cfg.limits.max_url_length
        self._max_depth = cfg.scope.max_depth
        self._honor_nofollow = cfg.politeness.honor_nofollow
        self._known = known
        self._opts: RequestOptions | None = None  # workers.headers, proxy, cookies, auth (workers.session)
        self._session: aiohttp.ClientSession | None = None
        self._warc: WarcWriter | None = None
        self._parser: concurrent.futures.ThreadPoolExecutor | None = None

    async def __aenter__(self) -> Fetcher:
        try:
            await self.open()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def open(self) -> None:
        """Create the session (and WARC writer); called by `async with`."""
        if self._session is not None:
            return
        w = self.cfg.workers
        if self.cfg.output.warc is not None:
            self._warc = WarcWriter(worker_warc_path(self.cfg.output.warc, self.worker_id))
        self._parser = concurrent.futures.ThreadPoolExecutor(max_workers=1,
                                                             thread_name_prefix=f"w{self.worker_id}-parse")
        self._opts = RequestOptions.from_config(w)
        connector = aiohttp.TCPConnector(
            limit=w.concurrency,
            limit_per_host=0,  # per-host politeness is the frontier's job
            ttl_dns_cache=DNS_CACHE_SECONDS,
            # through a proxy, the proxy resolves the sites' names: only the URL text is judged (scope)
            resolver=_PublicResolver() if self.scope.block_private and w.proxy is None else None,
            # aiohttp warns about this flag on Pythons that fixed the leak it works around
            enable_cleanup_closed=getattr(aiohttp.connector, "NEEDS_CLEANUP_CLOSED", True),
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=w.timeout, sock_connect=w.connect_timeout),
            headers={
                **self._opts.extra_headers,  # none of them is one of these (config.RESERVED_HEADERS)
                "User-Agent": self.cfg.politeness.user_agent,
                "Accept": ACCEPT_HTML,
                "Accept-Encoding": ACCEPT_ENCODING,
            },
            auto_decompress=False,  # decoded here, with a cap: see read_body
            cookie_jar=aiohttp.DummyCookieJar(),  # cookies, when kept, are per host (workers.session)
            trust_env=False,  # no HTTP_PROXY & co.: only workers.proxy
            max_field_size=MAX_HEADER_FIELD,
            max_line_size=MAX_HEADER_FIELD,
        )

    async def aclose(self) -> None:
        session, self._session = self._session, None
        warc, self._warc = self._warc, None
        parser, self._parser = self._parser, None
        try:
            if session is not None:
                await session.close()
        finally:
            if parser is not None:
                parser.shutdown(wait=False, cancel_futures=True)
            if warc is not None:
                warc.close()

    # -- one job ----------------------------------------------------------------------------------

    async def fetch(self, job: FetchJob) -> FetchResult:
        """Fetch one job; always returns a FetchResult (status + named reason), never raises.

        Cancellation (asyncio.CancelledError) is the one exception that propagates.
        """
        start = time.monotonic()
        fetched_at = time.time()
        fields: dict[str, Any]
        try:
            if self._session is None:
                raise RuntimeError("Fetcher used outside 'async with'")
            if job.robots:
                fields = await self._fetch_robots(job)
            elif job.sitemap:
                fields = await self._fetch_sitemap(job)
            else:
                fields = await self._fetch_page(job)
        except BadEncoding:
            fields = {"status": Status.FAIL, "reason": "bad_encoding"}
        except Exception as exc:  # noqa: BLE001 - the translation point: nothing escapes a fetch
            fields = self._translate(exc, job)
        return FetchResult(job=job, elapsed=time.monotonic() - start, fetched_at=fetched_at,
                           worker=self.worker_id, **fields)

    def _translate(self, exc: Exception, job: FetchJob) -> dict[str, Any]:
        # Order matters: aiohttp's timeouts are ClientErrors too, and connector errors are OSErrors.
        if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
            return {"status": Status.FAIL, "reason": "timeout"}
        if isinstance(exc, aiohttp.ClientConnectorCertificateError):
            return {"status": Status.SKIP, "reason": "ssl_certificate"}
        if isinstance(exc, (aiohttp.ClientSSLError, ssl.SSLError)):
            return {"status": Status.FAIL, "reason": "ssl_error"}
        if isinstance(getattr(exc, "os_error", None), _PrivateAddress):
            return {"status": Status.SKIP, "reason": "private_address"}
        dns_error = getattr(aiohttp, "ClientConnectorDNSError", ())
        if dns_error and isinstance(exc, dns_error):
            return {"status": Status.FAIL, "reason": "dns_error"}
        if isinstance(exc, aiohttp.ClientConnectorError):
            return {"status": Status.FAIL, "reason": "connect_error"}
        if isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, ConnectionError,
                            aiohttp.ClientOSError, aiohttp.ClientConnectionError)):
            return {"status": Status.FAIL, "reason": "connection_reset"}
        if isinstance(exc, aiohttp.InvalidURL):
            return {"status": Status.SKIP, "reason": "invalid_url"}
        if isinstance(exc, aiohttp.ClientResponseError):
            return {"status": Status.FAIL, "reason": "bad_response"}
        if isinstance(exc, aiohttp.ClientError):
            return {"status": Status.FAIL, "reason": f"client_error:{type(exc).__name__}"}
        log.exception("worker %d: unexpected error fetching %s", self.worker_id, job.url)
        return {"status": Status.FAIL, "reason": f"internal_error:{type(exc).__name__}"}

    @staticmethod
    def _request_url(url: str) -> URL | None:
        """The URL as sent (already canonical, so no re-quoting), or None when it cannot be requested."""
        try:
            u = URL(url, encoded=url.isascii())
        except (ValueError, TypeError):
            return None
        if u.scheme not in ("http", "https") or not u.host:
            return None
        return u

    def _get(self, url: URL, accept: str, conditional: dict[str, str] | None = None) -> Any:
        assert self._session is not None and self._opts is not None
        opts = self._opts
        headers = {"Accept": accept} if accept != ACCEPT_HTML else None
        if conditional:
            headers = {**(headers or {}), **conditional}
        if not opts.active:
            return self._session.get(url, allow_redirects=False, headers=headers, proxy=opts.proxy,
                                     proxy_headers=opts.proxy_headers)
        host = url_host(str(url))
        headers = {**(headers or {}), **opts.headers_for(url, host)}
        return self._get_per_host(url, host, headers)

    @contextlib.asynccontextmanager
    async def _get_per_host(self, url: URL, host: str, headers: dict[str, str]) -> Any:
        """A request with the host's credentials or cookies; the response's cookies are kept for it."""
        assert self._session is not None and self._opts is not None
        opts = self._opts
        async with self._session.get(url, allow_redirects=False, headers=headers, proxy=opts.proxy,
                                     proxy_headers=opts.proxy_headers) as resp:
            opts.response(host, resp)
            yield resp

    def _write_warc(self, url: str, resp: aiohttp.ClientResponse, raw: bytes | None, ip: str | None,
                    revisit: tuple[str, FetchJob, str] | None = None) -> None:
        """A response record, or (`revisit`: profile, the job, the payload digest) a revisit record that refers to
        the job's last capture, with its request record."""
        if self._warc is None or raw is None:
            return
        version = f"HTTP/{resp.version.major}.{resp.version.minor}" if resp.version else "HTTP/1.1"
        exchange = self._warc.write_exchange
        if revisit is not None:
            profile, job, digest = revisit
            exchange = functools.partial(self._warc.write_revisit, profile=profile, refers_to_date=job.captured_at,
                                         payload_digest=digest)
        exchange(
            url=url,
            method=resp.request_info.method,
            request_headers=[(k, v) for k, v in resp.request_info.headers.items()
                             if k.lower() not in SECRET_HEADERS],  # credentials stay out of the archive
            http_version=version,
            status=resp.status,
            status_reason=resp.reason or "",
            response_headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers],
            body=raw,
            ip=ip,
        )

    @staticmethod
    def _peer_ip(resp: aiohttp.ClientResponse) -> str | None:
        conn = resp.connection
        transport = conn.transport if conn is not None else None
        peer = transport.get_extra_info("peername") if transport is not None else None
        return peer[0] if peer else None

    async def _fetch_page(self, job: FetchJob) -> dict[str, Any]:
        url = self._request_url(job.url)
        if url is None:
            return {"status": Status.SKIP, "reason": "invalid_url"}
        sent = time.monotonic()
        async with self._get(url, ACCEPT_HTML, conditional_headers(job)) as resp:
            code = resp.status
            ctype = mime_type(resp.headers.get("Content-Type"))
            base: dict[str, Any] = {"http_status": code, "content_type": ctype, "latency": time.monotonic() - sent,
                                    "etag": resp.headers.get("ETag"), "last_modified": resp.headers.get("Last-Modified")}
            if code == 304 and (job.etag or job.last_modified):
                if self._warc is not None:
                    self._write_warc(job.url, resp, b"", self._peer_ip(resp), revisit=(NOT_MODIFIED_PROFILE, job, ""))
                return {**base, "status": Status.OK, "reason": "not_modified"}
            not_ok = self._not_ok(job.url, resp)
            if not_ok is not None:
                return {**base, **not_ok}
            if ctype is not None and ctype not in HTML_TYPES:
                return {**base, "status": Status.OK, "reason": "not_html"}
            length = resp.content_length
            if length is not None and length > self._cap and not resp.headers.get("Content-Encoding"):
                return {**base, "status": Status.SKIP, "reason": "too_large"}

            header_ctype = resp.headers.get("Content-Type")

            def inspect(head: bytes) -> str | None:
                if ctype is None and not looks_html(head):
                    return "not_html"
                if looks_binary(head, header_ctype):
                    return "binary_body"
                return None

            ip = self._peer_ip(resp) if self._warc is not None else None
            body = await read_body(resp, self._cap, keep_raw=self._warc is not None, inspect=inspect)
            base["bytes"] = body.size
            if body.stop == "not_html":
                return {**base, "status": Status.OK, "reason": "not_html"}
            if body.stop is not None:
                return {**base, "status": Status.SKIP, "reason": body.stop}
            if ctype is None:
                base["content_type"] = "text/html"  # sniffed
            base["digest"] = body_digest(body.data)
            same = job.digest and job.digest == base["digest"] and body.raw is not None
            self._write_warc(job.url, resp, body.raw, ip,
                             revisit=(IDENTICAL_PAYLOAD_PROFILE, job, payload_digest(body.raw)) if same else None)
        if len(body.data) > BIG_PAGE_BYTES and self._parser is not None:
            links = await asyncio.get_running_loop().run_in_executor(self._parser, self._links, body.data, job,
                                                                     header_ctype)
        else:
            links = self._links(body.data, job, header_ctype)
        return {**base, "status": Status.OK, **links}

    def _not_ok(self, url: str, resp: aiohttp.ClientResponse) -> dict[str, Any] | None:
        """The result fields of a response that is not a 2xx (a redirect, a retry, a skip); None for a 2xx."""
        code = resp.status
        if 300 <= code < 400:
            return self._redirect(url, resp)
        if code == 429 or code >= 500:
            retry = parse_retry_after(resp.headers.get("Retry-After"))
            return {"status": Status.FAIL, "reason": f"http_{code}", "retry_after": retry}
        if code >= 400 or code < 200:
            return {"status": Status.SKIP, "reason": f"http_{code}"}
        return None

    async def _fetch_sitemap(self, job: FetchJob) -> dict[str, Any]:
        """A sitemap or sitemap index (workers.sitemaps): OK "sitemap" with its pages as `outlinks` (in
        scope, like links), OK "sitemap_index" with its sitemaps in `sitemaps`; SKIP sitemap_malformed or
        sitemap_too_large (decompressed past workers.sitemaps.MAX_BYTES: a gzip bomb); the rest as a page."""
        url = self._request_url(job.url)
        if url is None:
            return {"status": Status.SKIP, "reason": "invalid_url"}
        async with self._get(url, ACCEPT_SITEMAP) as resp:
            base: dict[str, Any] = {"http_status": resp.status,
                                    "content_type": mime_type(resp.headers.get("Content-Type"))}
            not_ok = self._not_ok(job.url, resp)
            if not_ok is not None:
                return {**base, **not_ok}
            decoder = decoder_for(resp.headers.get("Content-Encoding"))
            reader = SitemapReader(job.url, rules=self._rules, max_url_length=self._max_url_length)
            raw: list[bytes] | None = [] if self._warc is not None else None
            ip = self._peer_ip(resp) if self._warc is not None else None
            try:
                async for chunk in resp.content.iter_any():
                    if raw is not None:
                        raw.append(chunk)
                    reader.feed(decoder.feed(chunk, reader.room()))
                sitemap = reader.close()
            except SitemapError as exc:
                return {**base, "bytes": reader.size, "status": Status.SKIP, "reason": exc.reason}
            self._write_warc(job.url, resp, b"".join(raw) if raw is not None else None, ip)
        check = self.scope.check
        in_scope = [i for i, u in enumerate(sitemap.urls) if check(u) is None]
        kept = tuple(sitemap.urls[i] for i in in_scope)
        fields = {**base, "bytes": reader.size, "status": Status.OK,
                  "skipped_links": sitemap.skipped + len(sitemap.urls) - len(kept),
                  "bad_hints": sitemap.bad_priorities + sitemap.bad_hints}
        if sitemap.index:
            return {**fields, "reason": "sitemap_index", "sitemaps": kept}
        if sitemap.priorities is not None:  # <priority> seeds the score of the URLs it lists
            fields["priorities"] = tuple(sitemap.priorities[i] for i in in_scope)
        if sitemap.first_intervals is not None:  # <changefreq> / <lastmod>: their first revisit interval
            fields["first_intervals"] = tuple(sitemap.first_intervals[i] for i in in_scope)
        return {**fields, "reason": "sitemap", "outlinks": kept}

    def _links(self, body: bytes, job: FetchJob, content_type: str | None) -> dict[str, Any]:
        """The outlinks fields of a page's result: extracted, in scope, and not known to the Bloom filter."""
        batch = extract_links(body, job.url, content_type=content_type, honor_nofollow=self._honor_nofollow,
                              rules=self._rules, max_links=self._max_links, cache=self._hrefs,
                              sketch_text=job.sketch, max_url_length=self._max_url_length)
        kept = self._in_scope.kept(batch.links)
        skipped = batch.skipped + len(batch.links) - len(kept)
        known = 0
        # links past max_depth are counted by the frontier (link_max_depth), so they are all sent
        if self._known is not None and (self._max_depth is None or job.depth < self._max_depth):
            kept, known = self._known.split(kept)
        return {"outlinks": tuple(kept), "skipped_links": skipped, "known_links": known, "sketch": batch.sketch}

    def _verdict(self, url: str) -> str | None:
        """Why a link is not sent (ScopeMemo): too long, or out of scope; None: it is sent."""
        return "url_too_long" if len(url) > self._max_url_length else self.scope.check(url)

    def _redirect(self, from_url: str, resp: aiohttp.ClientResponse) -> dict[str, Any]:
        location = resp.headers.get("Location")
        if location is None:
            return {"status": Status.SKIP, "reason": f"http_{resp.status}"}
        try:
            target = canonicalize(location, base=from_url, rules=self._rules)
        except InvalidURL:
            return {"status": Status.SKIP, "reason": "bad_redirect"}
        return {"status": Status.OK, "reason": "redirect", "redirect_to": target}

    async def _fetch_robots(self, job: FetchJob) -> dict[str, Any]:
        current = job.url
        for _hop in range(ROBOTS_MAX_REDIRECTS + 1):
            url = self._request_url(current)
            if url is None:
                return {"status": Status.SKIP, "reason": "invalid_url"}
            async with self._get(url, ACCEPT_ROBOTS) as resp:
                code = resp.status
                base: dict[str, Any] = {"http_status": code,
                                        "content_type": mime_type(resp.headers.get("Content-Type"))}
                if 300 <= code < 400 and resp.headers.get("Location") is not None:
                    try:
                        current = canonicalize(resp.headers["Location"], base=current, rules=self._rules)
                    except InvalidURL:
                        return {**base, "status": Status.OK, "reason": "robots_bad_redirect", "robots_txt": ""}
                    continue
                if code == 429 or code >= 500:
                    retry = parse_retry_after(resp.headers.get("Retry-After"))
                    return {**base, "status": Status.FAIL, "reason": f"http_{code}", "retry_after": retry}
                if not 200 <= code < 300:  # 4xx (and a 3xx without Location): unavailable, allow all
                    return {**base, "status": Status.OK, "reason": f"robots_http_{code}", "robots_txt": ""}
                ip = self._peer_ip(resp) if self._warc is not None else None
                body = await read_body(resp, ROBOTS_MAX_BYTES, truncate=True, keep_raw=self._warc is not None)
                self._write_warc(current, resp, body.raw, ip)
                text = body.data.decode("utf-8", "replace")
                if text.startswith("\ufeff"):
                    text = text[1:]
                return {**base, "status": Status.OK, "bytes": body.size, "robots_txt": text}
        return {"status": Status.OK, "reason": "robots_redirect_loop", "robots_txt": ""}


# -- the worker process ----------------------------------------------------------------------------

ORPHAN_EXIT_AFTER = 5.0  # seconds an orphaned worker (its supervisor died) gets to stop before it exits


async def _serve(worker_id: int, cfg: CrawlConfig, jobs: Any, results: Any, bloom_name: BloomName | None,
                 in_flight: Any = None) -> None:
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    terminating = False

    def on_sigterm() -> None:
        nonlocal terminating
        terminating = True
        if main is not None:
            main.cancel()

    loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    n = cfg.workers.concurrency
    inbox: asyncio.Queue[FetchJob | None] = asyncio.Queue()  # bounded by `slots`
    slots = threading.Semaphore(n)
    stop = threading.Event()
    # a full (bounded) results queue holds the fetch tasks back, one blocking put at a time
    put_pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"w{worker_id}-put")
    sender = ResultSender(results, put_pool)
    reader = threading.Thread(target=read_jobs, args=(jobs, loop, inbox, slots, n, stop), name=f"w{worker_id}-jobs",
                              daemon=True)

    busy = 0  # fetches in flight in this worker

    async def fetch_loop(fetcher: Fetcher) -> None:
        nonlocal busy
        while True:
            job = await inbox.get()
            if job is None:
                return
            slots.release()
            busy += 1
            if in_flight is not None:
                in_flight[worker_id] = busy
            try:
                result = await fetcher.fetch(job)
            except Exception as exc:  # noqa: BLE001 - fetch() never raises; this guards against a bug in it
                log.exception("worker %d: fetch raised for %s", worker_id, job.url)
                result = FetchResult(job=job, status=Status.FAIL, reason=f"internal_error:{type(exc).__name__}",
                                     worker=worker_id, fetched_at=time.time())
            busy -= 1
            if in_flight is not None:
                in_flight[worker_id] = busy
            await sender.send(result, idle=busy == 0 and inbox.empty())

    scope = Scope.from_config(cfg)
    # Only a plain probabilistic filter may drop links in a worker: exact mode confirms every Bloom "maybe" in
    # LMDB, a counting (deletable) filter is another layout, and a whitelisted URL must reach the frontier's
    # exact confirm even when the filter holds it by mistake, and with dedup.recrawl_after a link to a known
    # page must reach the frontier, which may find that page stale.
    drop_known = not (cfg.dedup.exact or cfg.dedup.deletable or cfg.dedup.whitelist is not None
                      or cfg.dedup.recrawl_after is not None)
    known = KnownLinks(bloom_name) if bloom_name is not None and drop_known else None
    try:
        async with Fetcher(cfg, scope, worker_id, known) as fetcher:
            reader.start()
            await asyncio.gather(*(fetch_loop(fetcher) for _ in range(n)))
        await sender.flush()  # the fetches that were in flight at the sentinel
    except asyncio.CancelledError:
        if not terminating:
            raise
        log.info("worker %d: SIGTERM, stopping", worker_id)
        results.cancel_join_thread()  # do not hang at exit on a queue nobody drains any more
    finally:
        stop.set()
        if known is not None:
            known.close()
        put_pool.shutdown(wait=not terminating, cancel_futures=terminating)
        loop.remove_signal_handler(signal.SIGTERM)


def _bloom_name(ref: Any) -> BloomName | None:
    if ref is None:
        return None
    if isinstance(ref, str):
        return lambda: ref
    return lambda: ref.value.decode() or None


def run_worker(
    worker_id: int,
    cfg: CrawlConfig,
    jobs: multiprocessing.Queue[JobBatch | None],
    results: multiprocessing.Queue[ResultBatch],
    bloom_name: Any = None,
    supervisor_pid: int | None = None,
    log_level: str = "warning",
    in_flight: Any = None,
) -> None:
    """Target of a spawned worker process: fetch batches of jobs until a None sentinel, one FetchResult per
    job, sent in batches.

    SIGINT is ignored (the supervisor coordinates shutdown); SIGTERM stops promptly (jobs in flight are
    abandoned: their leases expire). On the sentinel, fetches in flight finish and are reported first.
    The worker dies with its supervisor (`supervisor_pid`, default the parent; see frontier.crawl.child):
    SIGTERM when it dies, and an exit ORPHAN_EXIT_AFTER seconds later if that was not enough.
    `bloom_name` names the frontier's shared Bloom filter: a str, or a shared char array that the frontier
    process fills in when it is ready (frontier.crawl.process.Channels), so a worker can start before it; None
    or empty: there is none. It is used in probabilistic mode only (KnownLinks). `log_level`: run_frontier.py
    --log-level (frontier.crawl.child.configure_logging). `in_flight`: a shared int array
    (frontier.crawl.process.Channels.in_flight) whose `worker_id` slot this worker keeps at its fetches in flight.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    supervised(f"worker-{worker_id}", os.getppid() if supervisor_pid is None else supervisor_pid,
               on_orphaned=lambda: os.kill(os.getpid(), signal.SIGTERM), exit_after=lambda: ORPHAN_EXIT_AFTER,
               exit_code=1, detail=str(cfg.storage.data_dir), log_level=log_level)
    coro = _serve(worker_id, cfg, jobs, results, _bloom_name(bloom_name), in_flight)
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        asyncio.run(coro)
    else:
        uvloop.run(coro)
