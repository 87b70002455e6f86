"""The fetcher worker: one aiohttp session per process, one FetchResult per FetchJob, never an exception.

Two layers:

    Fetcher(cfg, scope, worker_id=0)            async context manager; `await f.fetch(job) -> FetchResult`
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

Bodies are read with automatic decompression off and decoded here, chunk by chunk, with an output cap:
a gzip or brotli bomb stops at limits.max_body_bytes + 1 decoded bytes. An unknown Content-Encoding
token is passed through as identity (what browsers do with, e.g., the common misconfiguration
"Content-Encoding: utf-8"). `FetchResult.bytes` counts decoded body bytes read.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import email.utils
import logging
import multiprocessing.connection
import os
import queue
import signal
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import aiohttp
from yarl import URL

from frontier.canonical import canonicalize
from frontier.child import supervised
from frontier.errors import InvalidURL
from frontier.messages import FetchJob, FetchResult, Status
from frontier.scope import Scope, is_private_host
from workers.links import extract_links
from workers.warc import WarcWriter, worker_warc_path

try:  # optional: br is only advertised when it can be decoded
    import brotli
except ImportError:  # pragma: no cover - depends on the environment
    brotli = None

if TYPE_CHECKING:
    import multiprocessing

    from frontier.config import CrawlConfig

__all__ = ["Fetcher", "ROBOTS_MAX_BYTES", "ROBOTS_MAX_REDIRECTS", "parse_retry_after", "run_worker"]

log = logging.getLogger(__name__)

ROBOTS_MAX_BYTES = 512 * 1024  # RFC 9309 2.5: parse at least 500 KiB; the rest is ignored
ROBOTS_MAX_REDIRECTS = 5  # RFC 9309 2.3.1.2
SNIFF_BYTES = 512
BINARY_SNIFF_BYTES = 1024
DNS_CACHE_SECONDS = 300
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
ACCEPT_HTML = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5"
ACCEPT_ROBOTS = "text/plain,*/*;q=0.5"
ACCEPT_ENCODING = "gzip, deflate, br" if brotli is not None else "gzip, deflate"
# Real sites send big cookies and CSP headers; aiohttp's 8190 default refuses some of them.
MAX_HEADER_FIELD = 32 * 1024
_HTML_MARKERS = (b"<html", b"<!doctype html", b"<a ", b"<head", b"<body")
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
# WHATWG MIME sniffing's "binary data bytes": random bytes are about 10% of them, text next to none
_CONTROL_BYTES = bytes([*range(0x00, 0x09), 0x0B, *range(0x0E, 0x1B), *range(0x1C, 0x20)])
BINARY_CONTROL_SHARE = 1 / 32


# -- small pure helpers --------------------------------------------------------------------------


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


def _mime(content_type: str | None) -> str | None:
    if not content_type:
        return None
    mime = content_type.split(";", 1)[0].strip().lower()
    return mime or None


def _looks_html(head: bytes) -> bool:
    sample = head[:SNIFF_BYTES].lstrip(b"\xef\xbb\xbf \t\r\n\x0c").lower()
    return any(marker in sample for marker in _HTML_MARKERS)


def _looks_binary(head: bytes, content_type: str | None) -> bool:
    """NUL bytes, and more than BINARY_CONTROL_SHARE control bytes, in the first 1 KB, unless the page is
    UTF-16/32 (which is full of NULs). A few stray NULs in a real (if broken) page do not make it binary."""
    sample = head[:BINARY_SNIFF_BYTES]
    if b"\x00" not in sample:
        return False
    if head.startswith(_UTF16_BOMS):
        return False
    if content_type and ("utf-16" in content_type.lower() or "utf-32" in content_type.lower()):
        return False
    return len(sample) - len(sample.translate(None, _CONTROL_BYTES)) > len(sample) * BINARY_CONTROL_SHARE


# -- content decoding with an output cap -----------------------------------------------------------


class _BadEncoding(Exception):
    """The body does not decode per its Content-Encoding."""


class _Identity:
    def feed(self, data: bytes, limit: int) -> bytes:
        return data


class _Zlib:
    """gzip (several members allowed) or deflate (zlib-wrapped or raw, told apart by the first bytes)."""

    def __init__(self, kind: str) -> None:
        self._kind = kind
        self._d: Any = None

    def _new(self, first: bytes) -> Any:
        if self._kind == "gzip":
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        zlib_header = len(first) >= 2 and first[0] & 0x0F == 8 and (first[0] << 8 | first[1]) % 31 == 0
        return zlib.decompressobj(zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS)

    def feed(self, data: bytes, limit: int) -> bytes:
        out = b""
        try:
            while data:
                if self._d is None:
                    self._d = self._new(data)
                out += self._d.decompress(data, max(1, limit - len(out)))
                if len(out) >= limit:
                    return out
                if not self._d.eof:
                    return out
                data = self._d.unused_data  # a next gzip member (or trailing garbage)
                self._d = None
                if self._kind != "gzip":
                    return out  # bytes after a deflate stream are ignored
                if data and not data.startswith(b"\x1f\x8b"):
                    return out  # trailing garbage after the last gzip member: ignored, as browsers do
        except zlib.error as exc:
            raise _BadEncoding(str(exc)) from None
        return out


class _Brotli:
    def __init__(self) -> None:
        self._d = brotli.Decompressor()

    def feed(self, data: bytes, limit: int) -> bytes:
        try:
            return self._d.process(data, output_buffer_limit=max(1, limit))
        except brotli.error as exc:
            raise _BadEncoding(str(exc)) from None


def _decoder(content_encoding: str | None) -> Any:
    codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if not codings:
        return _Identity()
    if len(codings) > 1:
        raise _BadEncoding(f"stacked content codings {content_encoding!r}")
    coding = codings[0]
    if coding in ("gzip", "x-gzip"):
        return _Zlib("gzip")
    if coding == "deflate":
        return _Zlib("deflate")
    if coding == "br":
        if brotli is None:
            raise _BadEncoding("br without brotli installed")
        return _Brotli()
    return _Identity()  # unknown token: browsers pass the body through


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


class _Body:
    __slots__ = ("data", "raw", "size", "stop")

    def __init__(self, data: bytes, raw: bytes | None, size: int, stop: str | None) -> None:
        self.data = data  # decoded, at most the cap
        self.raw = raw  # as received (for the WARC), when asked for and complete
        self.size = size  # decoded bytes read
        self.stop = stop  # None: read to the end; else the reason reading stopped early


async def _read_body(resp: aiohttp.ClientResponse, cap: int, *, truncate: bool = False, keep_raw: bool = False,
                     inspect: Callable[[bytes], str | None] | None = None) -> _Body:
    """Read and decode the body up to `cap` decoded bytes.

    Past the cap: stop with "too_large", or when `truncate`, keep the first `cap` bytes as a complete body.
    `inspect` sees the first BINARY_SNIFF_BYTES decoded bytes (or all of a shorter body) once; a reason it
    returns stops the read.
    """
    decoder = _decoder(resp.headers.get("Content-Encoding"))
    parts: list[bytes] = []
    raw: list[bytes] | None = [] if keep_raw else None
    size = 0
    inspected = inspect is None
    async for chunk in resp.content.iter_any():
        if raw is not None:
            raw.append(chunk)
        out = decoder.feed(chunk, cap + 1 - size)
        if not out:
            continue
        parts.append(out)
        size += len(out)
        if size > cap:  # checked first: a bomb of NUL bytes is "too_large", whatever its first chunk holds
            if truncate:
                return _Body(b"".join(parts)[:cap], None, size, None)
            return _Body(b"", None, size, "too_large")
        if not inspected and size >= BINARY_SNIFF_BYTES:
            inspected = True
            stop = inspect(b"".join(parts)[:BINARY_SNIFF_BYTES])  # type: ignore[misc]
            if stop:
                return _Body(b"", None, size, stop)
    data = b"".join(parts)
    if not inspected:
        stop = inspect(data)  # type: ignore[misc]
        if stop:
            return _Body(b"", None, size, stop)
    return _Body(data, b"".join(raw) if raw is not None else None, size, None)


# -- the fetcher -----------------------------------------------------------------------------------


class Fetcher:
    """Fetches jobs over one aiohttp session; `fetch` never raises (see the module docstring).

    `async with Fetcher(cfg, scope, worker_id) as f: result = await f.fetch(job)`. The session (and the
    WARC file when `cfg.output.warc` is set) belong to this object; `aclose()` is idempotent.
    """

    def __init__(self, cfg: CrawlConfig, scope: Scope, worker_id: int = 0) -> None:
        self.cfg = cfg
        self.scope = scope
        self.worker_id = worker_id
        self._rules = cfg.canonical
        self._cap = cfg.limits.max_body_bytes
        self._max_links = cfg.limits.max_links_per_page
        self._max_url_length = cfg.limits.max_url_length
        self._honor_nofollow = cfg.politeness.honor_nofollow
        self._session: aiohttp.ClientSession | None = None
        self._warc: WarcWriter | None = None

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
        connector = aiohttp.TCPConnector(
            limit=w.concurrency,
            limit_per_host=0,  # per-host politeness is the frontier's job
            ttl_dns_cache=DNS_CACHE_SECONDS,
            resolver=_PublicResolver() if self.scope.block_private else None,
            # aiohttp warns about this flag on Pythons that fixed the leak it works around
            enable_cleanup_closed=getattr(aiohttp.connector, "NEEDS_CLEANUP_CLOSED", True),
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=w.timeout, sock_connect=w.connect_timeout),
            headers={
                "User-Agent": self.cfg.politeness.user_agent,
                "Accept": ACCEPT_HTML,
                "Accept-Encoding": ACCEPT_ENCODING,
            },
            auto_decompress=False,  # decoded here, with a cap: see _read_body
            cookie_jar=aiohttp.DummyCookieJar(),
            max_field_size=MAX_HEADER_FIELD,
            max_line_size=MAX_HEADER_FIELD,
        )

    async def aclose(self) -> None:
        session, self._session = self._session, None
        warc, self._warc = self._warc, None
        try:
            if session is not None:
                await session.close()
        finally:
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
            else:
                fields = await self._fetch_page(job)
        except _BadEncoding:
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

    def _get(self, url: URL, accept: str) -> Any:
        assert self._session is not None
        headers = {"Accept": accept} if accept != ACCEPT_HTML else None
        return self._session.get(url, allow_redirects=False, headers=headers)

    def _write_warc(self, url: str, resp: aiohttp.ClientResponse, raw: bytes | None, ip: str | None) -> None:
        if self._warc is None or raw is None:
            return
        version = f"HTTP/{resp.version.major}.{resp.version.minor}" if resp.version else "HTTP/1.1"
        self._warc.write_exchange(
            url=url,
            method=resp.request_info.method,
            request_headers=list(resp.request_info.headers.items()),
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
        async with self._get(url, ACCEPT_HTML) as resp:
            code = resp.status
            ctype = _mime(resp.headers.get("Content-Type"))
            base: dict[str, Any] = {"http_status": code, "content_type": ctype}
            if 300 <= code < 400:
                return {**base, **self._redirect(job.url, resp)}
            if code == 429 or code >= 500:
                retry = parse_retry_after(resp.headers.get("Retry-After"))
                return {**base, "status": Status.FAIL, "reason": f"http_{code}", "retry_after": retry}
            if code >= 400 or code < 200:
                return {**base, "status": Status.SKIP, "reason": f"http_{code}"}
            if ctype is not None and ctype not in HTML_TYPES:
                return {**base, "status": Status.OK, "reason": "not_html"}
            length = resp.content_length
            if length is not None and length > self._cap and not resp.headers.get("Content-Encoding"):
                return {**base, "status": Status.SKIP, "reason": "too_large"}

            header_ctype = resp.headers.get("Content-Type")

            def inspect(head: bytes) -> str | None:
                if ctype is None and not _looks_html(head):
                    return "not_html"
                if _looks_binary(head, header_ctype):
                    return "binary_body"
                return None

            ip = self._peer_ip(resp) if self._warc is not None else None
            body = await _read_body(resp, self._cap, keep_raw=self._warc is not None, inspect=inspect)
            base["bytes"] = body.size
            if body.stop == "not_html":
                return {**base, "status": Status.OK, "reason": "not_html"}
            if body.stop is not None:
                return {**base, "status": Status.SKIP, "reason": body.stop}
            if ctype is None:
                base["content_type"] = "text/html"  # sniffed
            self._write_warc(job.url, resp, body.raw, ip)
        links, skipped = self._links(body.data, job.url, header_ctype)
        return {**base, "status": Status.OK, "outlinks": links, "skipped_links": skipped}

    def _links(self, body: bytes, page_url: str, content_type: str | None) -> tuple[tuple[str, ...], int]:
        batch = extract_links(body, page_url, content_type=content_type, honor_nofollow=self._honor_nofollow,
                              rules=self._rules, max_links=self._max_links)
        check, max_len = self.scope.check, self._max_url_length
        kept = [u for u in batch.links if len(u) <= max_len and check(u) is None]
        return tuple(kept), batch.skipped + len(batch.links) - len(kept)

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
                                        "content_type": _mime(resp.headers.get("Content-Type"))}
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
                body = await _read_body(resp, ROBOTS_MAX_BYTES, truncate=True, keep_raw=self._warc is not None)
                self._write_warc(current, resp, body.raw, ip)
                text = body.data.decode("utf-8", "replace")
                if text.startswith("\ufeff"):
                    text = text[1:]
                return {**base, "status": Status.OK, "bytes": body.size, "robots_txt": text}
        return {"status": Status.OK, "reason": "robots_redirect_loop", "robots_txt": ""}


# -- the worker process ----------------------------------------------------------------------------

_POLL_SECONDS = 0.5  # how often the job reader looks up from a blocking get (stop flag)
ORPHAN_EXIT_AFTER = 5.0  # seconds an orphaned worker (its supervisor died) gets to stop before it exits
_LOCK_BACKOFF = 0.001  # a job was waiting but another reader got the queue's lock first


def _wait_for_job(jobs: Any, timeout: float) -> bool:
    """Wait until the job queue may hold a message, without taking its read lock; True if it may.

    `multiprocessing.Queue.get(timeout=...)` holds the queue's read lock while it waits, so one stopped
    worker (SIGSTOP, a debugger, a frozen cgroup) waiting there would starve every other worker, and
    the frontier's leases of the jobs behind it would expire and be fetched twice.
    """
    reader = getattr(jobs, "_reader", None)  # the Queue's pipe end (not public); absent on a queue.Queue
    if reader is None:
        time.sleep(min(timeout, 0.005))
        return True
    return bool(multiprocessing.connection.wait([reader], timeout))


def _reader(jobs: Any, loop: asyncio.AbstractEventLoop, inbox: asyncio.Queue[FetchJob | None],
            slots: threading.Semaphore, tasks: int, stop: threading.Event) -> None:
    """Thread: blocking gets from the mp queue, handed to the loop with call_soon_threadsafe.

    `slots` bounds the jobs taken but not yet started (a fetch task releases one when it takes a job),
    so a busy worker leaves jobs in the shared queue for the other workers.
    """
    try:
        while not stop.is_set():
            if not slots.acquire(timeout=_POLL_SECONDS):
                continue
            ready = False
            while True:
                try:
                    job = jobs.get_nowait()  # holds the queue's read lock only to read a waiting message
                    break
                except queue.Empty:
                    if stop.is_set():
                        job = None
                        break
                    if ready:
                        time.sleep(_LOCK_BACKOFF)
                    ready = _wait_for_job(jobs, _POLL_SECONDS)
            if job is None:
                break
            loop.call_soon_threadsafe(inbox.put_nowait, job)
        for _ in range(tasks):  # one sentinel per fetch task; each finishes its fetch in flight first
            loop.call_soon_threadsafe(inbox.put_nowait, None)
    except (EOFError, OSError, ValueError):  # the queue was closed under us
        log.warning("worker: job queue closed, stopping")
        try:
            for _ in range(tasks):
                loop.call_soon_threadsafe(inbox.put_nowait, None)
        except RuntimeError:
            pass
    except RuntimeError:  # the loop is closed: the worker is going away
        pass


async def _serve(worker_id: int, cfg: CrawlConfig, jobs: Any, results: Any) -> None:
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
    reader = threading.Thread(target=_reader, args=(jobs, loop, inbox, slots, n, stop), name=f"w{worker_id}-jobs",
                              daemon=True)

    async def fetch_loop(fetcher: Fetcher) -> None:
        while True:
            job = await inbox.get()
            if job is None:
                return
            slots.release()
            try:
                result = await fetcher.fetch(job)
            except Exception as exc:  # noqa: BLE001 - fetch() never raises; this guards against a bug in it
                log.exception("worker %d: fetch raised for %s", worker_id, job.url)
                result = FetchResult(job=job, status=Status.FAIL, reason=f"internal_error:{type(exc).__name__}",
                                     worker=worker_id, fetched_at=time.time())
            try:  # an unbounded (or not full) queue takes it at once: no thread hop
                results.put_nowait(result)
            except queue.Full:
                await loop.run_in_executor(put_pool, results.put, result)

    scope = Scope.from_config(cfg)
    try:
        async with Fetcher(cfg, scope, worker_id) as fetcher:
            reader.start()
            await asyncio.gather(*(fetch_loop(fetcher) for _ in range(n)))
    except asyncio.CancelledError:
        if not terminating:
            raise
        log.info("worker %d: SIGTERM, stopping", worker_id)
        results.cancel_join_thread()  # do not hang at exit on a queue nobody drains any more
    finally:
        stop.set()
        put_pool.shutdown(wait=not terminating, cancel_futures=terminating)
        loop.remove_signal_handler(signal.SIGTERM)


def run_worker(
    worker_id: int,
    cfg: CrawlConfig,
    jobs: multiprocessing.Queue[FetchJob | None],
    results: multiprocessing.Queue[FetchResult],
    bloom_name: str | None = None,
    supervisor_pid: int | None = None,
) -> None:
    """Target of a spawned worker process: fetch jobs until a None sentinel, one FetchResult per job.

    SIGINT is ignored (the supervisor coordinates shutdown); SIGTERM stops promptly (jobs in flight are
    abandoned: their leases expire). On the sentinel, fetches in flight finish and are reported first.
    The worker dies with its supervisor (`supervisor_pid`, default the parent; see frontier.child):
    SIGTERM when it dies, and an exit ORPHAN_EXIT_AFTER seconds later if that was not enough.
    `bloom_name` is reserved for a read-only Bloom pre-filter and ignored for now.
    """
    del bloom_name
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    supervised(f"worker-{worker_id}", os.getppid() if supervisor_pid is None else supervisor_pid,
               on_orphaned=lambda: os.kill(os.getpid(), signal.SIGTERM), exit_after=lambda: ORPHAN_EXIT_AFTER,
               exit_code=1, detail=str(cfg.storage.data_dir))
    logging.basicConfig(level=logging.WARNING, format=f"%(asctime)s w{worker_id} %(levelname)s %(message)s")
    coro = _serve(worker_id, cfg, jobs, results)
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        asyncio.run(coro)
    else:
        uvloop.run(coro)
