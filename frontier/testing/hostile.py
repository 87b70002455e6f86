"""Hostile routes of the mock web: everything a real web does to a crawler, each on a named path.

All live on host 0 under /hostile/ and are linked from the hub "/hostile/index.html", which the index
links when `SiteSpec.hostile` is set. `HOSTILE_ROUTES` lists each route as linked from the hub, what the
server does and what a correct crawler should record. Two kinds of leaf pages let tests see what a
crawler did with a page's links: "/hostile/found/NAME.html" is linked from a page whose links should be
extracted (a crawler must fetch it), "/hostile/canary/NAME.html" from one whose links must not be
(a crawler must never fetch it). Every other link on a hostile page points to a popular page (already
known from the seed) or stays under /hostile/, so hostile routes never change `SiteGraph.reachable`.

Every loop here is bounded and every wait ends when the server closes (`pause` returns True).
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import hdrs, web

from frontier.testing.sitegraph import HOSTILE_HUB, INVALID_ORIGIN, LOOPBACK, PageRenderer

HTML = "text/html; charset=utf-8"

FLAKY_FAILURES = 2  # 503s before a flaky id answers 200
FLAKY_IDS = (1, 2, 3)
FLAKY_RETRY_AFTER = 1  # seconds, in the Retry-After header
HANG_SECONDS = 600.0  # /hostile/hang gives up (closes the connection) after this
DRIP_BYTES = 4096  # Content-Length of /hostile/drip
DRIP_CHUNK = 8  # bytes written per DRIP_INTERVAL
DRIP_INTERVAL = 1.0
HUGE_BYTES = 200 * 2**20  # body of /hostile/huge and /hostile/huge-chunked
HUGE_CHUNK = 256 * 2**10
BOMB_BLOCK = 2**20  # one full-flush deflate block inflates to this many bytes
BOMB_BLOCKS = 1088  # 1088 MiB inflated (> 1 GB), about 1.1 MB on the wire
CHAIN_HOPS = 20  # /hostile/chain/0 -> ... -> /hostile/chain/20 (200)
LONG_URL_CHARS = 100_000
RESET_BODY_SENT = 1024  # bytes of /hostile/reset sent before the RST
RESET_CONTENT_LENGTH = 65536


@dataclass(frozen=True)
class HostileRoute:
    """One hostile route: its path as linked from the hub, what the server does, what a crawler records."""

    path: str
    behaviour: str
    expect: str


HOSTILE_ROUTES: tuple[HostileRoute, ...] = (
    *(
        HostileRoute(
            f"/hostile/flaky?id={i}",
            f"503 with Retry-After: {FLAKY_RETRY_AFTER} for the first {FLAKY_FAILURES} requests of each id, "
            f"then 200 with a link to /hostile/found/flaky-{i}.html",
            "FAIL http_503 with retry_after=1 twice, then OK; found page fetched",
        )
        for i in FLAKY_IDS
    ),
    HostileRoute("/hostile/always-500", "500 on every request", "FAIL http_500, retried up to the retry limit"),
    HostileRoute(
        "/hostile/reset",
        f"200, Content-Length {RESET_CONTENT_LENGTH}, {RESET_BODY_SENT} body bytes, then a TCP RST",
        "FAIL (connection reset mid-body); no links",
    ),
    HostileRoute(
        "/hostile/reset-early",
        "TCP RST before any response byte",
        "FAIL (server disconnected); aiohttp retries once by itself on a reused keep-alive connection, "
        "so one attempt may count 2 requests",
    ),
    HostileRoute(
        "/hostile/hang",
        f"reads the request and never answers (closes after {HANG_SECONDS:g} s or at shutdown)",
        "FAIL timeout",
    ),
    HostileRoute(
        "/hostile/drip",
        f"200 at once, then {DRIP_CHUNK} body bytes every {DRIP_INTERVAL:g} s "
        f"(Content-Length {DRIP_BYTES}: {DRIP_BYTES // DRIP_CHUNK * DRIP_INTERVAL:g} s in all)",
        "FAIL timeout: needs a total timeout, a per-read timeout never fires",
    ),
    HostileRoute(
        "/hostile/huge", f"200 text/html, Content-Length {HUGE_BYTES}, streamed", "SKIP too_large, memory bounded"
    ),
    HostileRoute(
        "/hostile/huge-chunked",
        f"200 text/html, chunked, {HUGE_BYTES} bytes, no Content-Length",
        "SKIP too_large while reading, memory bounded",
    ),
    HostileRoute(
        "/hostile/gzip-bomb",
        f"200 text/html, Content-Encoding: gzip, about 1.1 MB inflating to {BOMB_BLOCKS} MiB of spaces",
        "SKIP too_large on the inflated size, memory bounded",
    ),
    HostileRoute(
        "/hostile/loop-a",
        "302 -> /hostile/loop-b, which 302s back to /hostile/loop-a",
        "each fetched once: the second redirect_to is already seen",
    ),
    HostileRoute(
        "/hostile/chain/0",
        f"302 -> /hostile/chain/1 -> ... -> /hostile/chain/{CHAIN_HOPS}, which is a 200 page "
        "linking /hostile/found/chain-end.html",
        "hops beyond the crawler's redirect limit are never requested",
    ),
    HostileRoute(
        "/hostile/redirect-invalid",
        f"301 -> {INVALID_ORIGIN}/landing.html",
        "redirect_to out of scope: never requested",
    ),
    HostileRoute(
        "/hostile/redirect-closed",
        "302 -> http://127.0.0.1:<closed port>/p/1.html",
        "redirect_to out of scope: never requested",
    ),
    HostileRoute(
        "/hostile/redirect-scheme", "302 -> ftp://example.invalid/file.txt", "SKIP: non-http redirect target"
    ),
    HostileRoute("/hostile/redirect-nowhere", "302 without a Location header", "SKIP or FAIL, no crash"),
    HostileRoute(
        "/hostile/as-png",
        "HTML served as image/png, linking /hostile/canary/as-png.html",
        "SKIP not_html; the canary is never requested",
    ),
    HostileRoute(
        "/hostile/no-content-type",
        "HTML with no Content-Type header, linking /hostile/canary/no-content-type.html",
        "a policy (skip, or sniff and parse); no crash",
    ),
    HostileRoute(
        "/hostile/binary",
        "4 KiB of random bytes (NULs included) as text/html; charset=utf-8",
        "no links, no crash",
    ),
    HostileRoute(
        "/hostile/bad-charset",
        "Content-Type: text/html; charset=x-nonsense, ASCII body linking /hostile/found/bad-charset.html",
        "decoded with a fallback charset; found page requested",
    ),
    HostileRoute(
        "/hostile/invalid-utf8",
        "claims utf-8, has bytes invalid in utf-8, links /hostile/found/invalid-utf8.html",
        "decoded with replacement; found page requested",
    ),
    HostileRoute(
        "/hostile/malformed",
        "unclosed tags, broken attributes, NUL bytes; links /hostile/found/malformed.html and popular pages",
        "found page requested; broken hrefs resolve under /hostile/ or are dropped",
    ),
    HostileRoute(
        "/hostile/calendar?month=0",
        "links /hostile/calendar?month=N+1, forever",
        "bounded by max depth or max pages per host",
    ),
    HostileRoute(
        "/hostile/grow?q=a",
        "links /hostile/grow?q=<q repeated twice>: the query doubles on every hop",
        "stopped by the max URL length",
    ),
    HostileRoute(
        "/hostile/long-url",
        f"links /hostile/long-target?x=<{LONG_URL_CHARS} chars> and /hostile/found/long-url.html",
        "the long link is dropped: /hostile/long-target never requested; found page requested",
    ),
    HostileRoute(
        "/hostile/latin1-hrefs",
        "latin-1 bytes in hrefs (/hostile/caf\\xe9.html) while claiming utf-8; "
        "links /hostile/found/latin1-hrefs.html",
        "no crash; found page requested",
    ),
    HostileRoute(
        "/hostile/schemes",
        "javascript:, mailto:, data:, tel:, ftp:, file:, about: links; links /hostile/found/schemes.html",
        "non-http links dropped (skipped_links); found page requested",
    ),
    HostileRoute(
        "/hostile/bad-ports",
        "http://127.0.0.1:99999/, :abc/, :-1/, http://127.0.0.1:/ (port 80), http://[::1/; "
        "links /hostile/found/bad-ports.html",
        "invalid links dropped, none requested; found page requested",
    ),
    HostileRoute(
        "/hostile/idn",
        "http://b\u00fccher.example/, http://xn--bcher-kva.example/, http://B\u00dcCHER.example/; "
        "links /hostile/found/idn.html",
        "out of scope, never requested; found page requested",
    ),
)

# Leaf pages a correct crawler requests, and ones it never requests (paths on host 0).
HOSTILE_FOUND: tuple[str, ...] = (
    *(f"/hostile/found/flaky-{i}.html" for i in FLAKY_IDS),
    "/hostile/found/bad-charset.html",
    "/hostile/found/invalid-utf8.html",
    "/hostile/found/malformed.html",
    "/hostile/found/long-url.html",
    "/hostile/found/latin1-hrefs.html",
    "/hostile/found/schemes.html",
    "/hostile/found/bad-ports.html",
    "/hostile/found/idn.html",
)
HOSTILE_CANARIES: tuple[str, ...] = ("/hostile/canary/as-png.html",)


def _page(title: str, body: str) -> str:
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>\n'
        f"<body><h1>{title}</h1>\n{body}\n</body></html>\n"
    )


def _rst(request: web.BaseRequest) -> None:
    """Close the connection with a TCP RST (SO_LINGER 0), dropping anything unsent."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    transport.abort()


_bomb_lock = threading.Lock()
_bomb: bytes | None = None


def gzip_bomb() -> bytes:
    """A gzip member of BOMB_BLOCKS full-flush blocks, each inflating to BOMB_BLOCK spaces; built once.

    After a full flush, deflate forgets its history, so every block compresses to the same bytes: we
    compress two and repeat the second. The CRC-32 of the whole is computed without inflating it:
    crc32(block, c) is affine in c, so it is applied BOMB_BLOCKS times as a 32x32 bit matrix.
    """
    global _bomb
    with _bomb_lock:
        if _bomb is None:
            block = b" " * BOMB_BLOCK
            z = zlib.compressobj(9, zlib.DEFLATED, 31)
            first = z.compress(block) + z.flush(zlib.Z_FULL_FLUSH)
            again = z.compress(block) + z.flush(zlib.Z_FULL_FLUSH)
            base = zlib.crc32(block, 0)
            columns = [zlib.crc32(block, 1 << i) ^ base for i in range(32)]
            crc = 0
            for _ in range(BOMB_BLOCKS):
                out, c, i = base, crc, 0
                while c:
                    if c & 1:
                        out ^= columns[i]
                    c >>= 1
                    i += 1
                crc = out
            size = BOMB_BLOCK * BOMB_BLOCKS
            # b"\x03\x00": an empty final fixed-Huffman block; then the gzip trailer.
            tail = b"\x03\x00" + struct.pack("<II", crc, size & 0xFFFFFFFF)
            _bomb = first + again * (BOMB_BLOCKS - 1) + tail
        return _bomb


class _NoContentTypeResponse(web.Response):
    """A Response sent without any Content-Type header (aiohttp adds one by default)."""

    async def _prepare_headers(self) -> None:
        await super()._prepare_headers()
        self._headers.popall(hdrs.CONTENT_TYPE, None)


class HostileRoutes:
    """Handlers of the /hostile/ paths on host 0.

    `pause(seconds)` sleeps and returns True early when the server is closing.
    """

    def __init__(self, renderer: PageRenderer, pause: Callable[[float], Awaitable[bool]]) -> None:
        self._renderer = renderer
        self._pause = pause
        self._flaky: Counter[str] = Counter()
        closed = f"http://{LOOPBACK}:{renderer.closed_port}"
        self._closed_origin = closed
        popular = [renderer.url(p) for p in range(1, min(renderer.graph.popular, 3) + 1)]
        self._popular = popular
        p1, p2, p3 = (popular * 3)[:3]
        hub = "\n".join(f'<li><a href="{r.path.replace("&", "&amp;")}">{r.path}</a></li>' for r in HOSTILE_ROUTES)
        self._static: dict[str, bytes] = {
            HOSTILE_HUB: _page("hostile hub", f"<ul>\n{hub}\n</ul>").encode(),
            "/hostile/bad-charset": _page(
                "bad charset", f'<a href="{p1}">popular</a> <a href="/hostile/found/bad-charset.html">found</a>'
            ).encode(),
            "/hostile/invalid-utf8": (
                b'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>invalid utf-8 \xff\xfe</title></head>'
                b"<body><p>bad bytes: \xc3\x28 \xa0\xa1 \xed\xa0\x80 \xf0\x28\x8c\xbc</p>\n"
                + f'<a href="{p1}">popular</a> <a href="/hostile/found/invalid-utf8.html">found</a>\n'.encode()
                + b'<a href="/hostile/bad-\xff-byte.html">bad byte in href</a>\n</body></html>\n'
            ),
            "/hostile/malformed": (
                "<html><head><title>malformed</title><body>\n"
                f'<div><p><a href="{p1}">ok link 1</a>\n'
                f"<table><tr><td><a href='{p2}'>ok link 2\n"
                f'<a href="{p3}" class="x" class="y" >duplicate attribute</a>\n'
                '<a href=broken"quote>broken quote</a>\n'
                "<a href=/hostile/found/malformed.html>unquoted found link</a>\n"
                "\x00\x00<a\x00href=\"/hostile/nul-in-tag.html\">nul inside the tag</a>\x00\n"
                '<a href="">empty href</a> <a href=" ">space href</a> <a>no href</a>\n'
                f'<a href="  {p2}  ">spaces around</a>\n'
                f'<a href="{p3}"<a href="/hostile/nested.html">nested</a>\n'
                "<p <p <p>>> <b><i>misnested</b></i> &notanentity; &#xZZ; &#99999999;\n"
                "<script>document.write('<a href=\"/hostile/in-script.html\">');</script>\n"
                "<a href=\"unterminated.html>the quote never ends here\n"
                "<!-- <a href=\"/hostile/in-comment.html\"> and the comment never ends"
            ).encode("utf-8", "surrogateescape"),
            "/hostile/long-url": _page(
                "long url",
                f'<a href="/hostile/long-target?x={"a" * LONG_URL_CHARS}">very long</a>\n'
                '<a href="/hostile/found/long-url.html">found</a>',
            ).encode(),
            "/hostile/long-target": _page("long target", "you should not be here").encode(),
            "/hostile/latin1-hrefs": (
                '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>latin-1 caf\u00e9</title></head><body>\n'
                '<a href="/hostile/caf\u00e9.html">caf\u00e9</a>\n'
                '<a href="/hostile/na\u00efve?q=\u00fc">na\u00efve</a>\n'
                f'<a href="{p1}">popular</a> <a href="/hostile/found/latin1-hrefs.html">found</a>\n</body></html>\n'
            ).encode("latin-1"),
            "/hostile/schemes": _page(
                "schemes",
                "\n".join(
                    f'<a href="{h}">x</a>'
                    for h in (
                        "javascript:void(0)",
                        "JavaScript:alert(1)",
                        "  javascript:alert(2)",
                        "java\tscript:alert(3)",
                        "mailto:someone@example.invalid",
                        "data:text/html;base64,PGEgaHJlZj0iL2hvc3RpbGUvY2FuYXJ5Ij54PC9hPg==",
                        "tel:+1-555-0100",
                        "ftp://example.invalid/file.txt",
                        "file:///etc/passwd",
                        "about:blank",
                        p2,
                        "/hostile/found/schemes.html",
                    )
                ),
            ).encode(),
            "/hostile/bad-ports": _page(
                "bad ports",
                "\n".join(
                    f'<a href="{h}">x</a>'
                    for h in (
                        f"http://{LOOPBACK}:99999/p/1.html",
                        f"http://{LOOPBACK}:abc/p/1.html",
                        f"http://{LOOPBACK}:-1/p/1.html",
                        f"http://{LOOPBACK}:/p/1.html",
                        "http://[::1/p/1.html",
                        "http://:80/p/1.html",
                        p3,
                        "/hostile/found/bad-ports.html",
                    )
                ),
            ).encode(),
            "/hostile/idn": _page(
                "idn",
                "\n".join(
                    f'<a href="{h}">x</a>'
                    for h in (
                        "http://b\u00fccher.example/",
                        "http://xn--bcher-kva.example/buch.html",
                        "http://B\u00dcCHER.example/Buch.html",
                        "//b\u00fccher.example/relative-scheme.html",
                        p1,
                        "/hostile/found/idn.html",
                    )
                ),
            ).encode(),
            f"/hostile/chain/{CHAIN_HOPS}": _page(
                "chain end", '<a href="/hostile/found/chain-end.html">found</a>'
            ).encode(),
        }
        self._as_png = _page("html as png", '<a href="/hostile/canary/as-png.html">canary</a>').encode()
        self._untyped = _page(
            "no content type", '<a href="/hostile/canary/no-content-type.html">canary or not</a>'
        ).encode()
        self._binary = random.Random(1234).randbytes(4096).replace(b"href", b"hre\x00")
        self._reset_body = (b"<html><body>" + b"r" * RESET_BODY_SENT)[:RESET_BODY_SENT]
        self._drip_body = (b"<html><body><p>" + b"drip " * DRIP_BYTES)[:DRIP_BYTES]
        self._huge_chunk = (b"<p>" + b"huge " * (HUGE_CHUNK // 5 + 1))[:HUGE_CHUNK]
        self._redirects = {
            "/hostile/loop-a": (302, "/hostile/loop-b"),
            "/hostile/loop-b": (302, "/hostile/loop-a"),
            "/hostile/redirect-invalid": (301, f"{INVALID_ORIGIN}/landing.html"),
            "/hostile/redirect-closed": (302, f"{closed}/p/1.html"),
            "/hostile/redirect-scheme": (302, "ftp://example.invalid/file.txt"),
        }
        self._special: dict[str, Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]] = {
            "/hostile/flaky": self._flaky_route,
            "/hostile/always-500": self._always_500,
            "/hostile/reset": self._reset,
            "/hostile/reset-early": self._reset_early,
            "/hostile/hang": self._hang,
            "/hostile/drip": self._drip,
            "/hostile/huge": self._huge,
            "/hostile/huge-chunked": self._huge,
            "/hostile/gzip-bomb": self._gzip_bomb,
            "/hostile/redirect-nowhere": self._redirect_nowhere,
            "/hostile/as-png": self._as_png_route,
            "/hostile/no-content-type": self._no_content_type,
            "/hostile/binary": self._binary_route,
            "/hostile/bad-charset": self._bad_charset,
            "/hostile/calendar": self._calendar,
            "/hostile/grow": self._grow,
        }

    def reset(self) -> None:
        """Forget per-id state (the flaky counters)."""
        self._flaky.clear()

    async def handle(self, request: web.BaseRequest, path: str) -> web.StreamResponse:
        special = self._special.get(path)
        if special is not None:
            return await special(request)
        body = self._static.get(path)
        if body is not None:
            return web.Response(body=body, headers={hdrs.CONTENT_TYPE: HTML})
        redirect = self._redirects.get(path)
        if redirect is not None:
            return web.Response(status=redirect[0], headers={hdrs.LOCATION: redirect[1]})
        if path.startswith("/hostile/chain/"):
            hop = path[len("/hostile/chain/") :]
            if hop.isascii() and hop.isdigit() and int(hop) < CHAIN_HOPS:
                return web.Response(status=302, headers={hdrs.LOCATION: f"/hostile/chain/{int(hop) + 1}"})
        if path.startswith(("/hostile/found/", "/hostile/canary/")) and path.endswith(".html"):
            return web.Response(body=_page("leaf", "<p>no links</p>").encode(), headers={hdrs.CONTENT_TYPE: HTML})
        return web.Response(status=404, body=b"<h1>404</h1>", headers={hdrs.CONTENT_TYPE: HTML})

    async def _flaky_route(self, request: web.BaseRequest) -> web.StreamResponse:
        key = request.query.get("id", "")
        self._flaky[key] += 1
        if self._flaky[key] <= FLAKY_FAILURES:
            return web.Response(
                status=503,
                body=b"<h1>503 try again</h1>",
                headers={hdrs.CONTENT_TYPE: HTML, hdrs.RETRY_AFTER: str(FLAKY_RETRY_AFTER)},
            )
        safe = "".join(c for c in key if c.isalnum())[:20]
        body = _page(f"flaky {safe}", f'<a href="/hostile/found/flaky-{safe}.html">found</a>')
        return web.Response(body=body.encode(), headers={hdrs.CONTENT_TYPE: HTML})

    async def _always_500(self, request: web.BaseRequest) -> web.StreamResponse:
        return web.Response(status=500, body=b"<h1>500 always</h1>", headers={hdrs.CONTENT_TYPE: HTML})

    async def _reset(self, request: web.BaseRequest) -> web.StreamResponse:
        resp = web.StreamResponse(headers={hdrs.CONTENT_TYPE: HTML, hdrs.CONTENT_LENGTH: str(RESET_CONTENT_LENGTH)})
        await resp.prepare(request)
        await resp.write(self._reset_body)
        await self._pause(0.05)  # let the bytes reach the client before the RST
        _rst(request)
        return resp

    async def _reset_early(self, request: web.BaseRequest) -> web.StreamResponse:
        _rst(request)
        return web.Response(status=204)

    async def _hang(self, request: web.BaseRequest) -> web.StreamResponse:
        await self._pause(HANG_SECONDS)
        _rst(request)
        return web.Response(status=204)

    async def _drip(self, request: web.BaseRequest) -> web.StreamResponse:
        resp = web.StreamResponse(headers={hdrs.CONTENT_TYPE: HTML, hdrs.CONTENT_LENGTH: str(DRIP_BYTES)})
        await resp.prepare(request)
        try:
            for start in range(0, DRIP_BYTES, DRIP_CHUNK):
                await resp.write(self._drip_body[start : start + DRIP_CHUNK])
                if start + DRIP_CHUNK < DRIP_BYTES and await self._pause(DRIP_INTERVAL):
                    _rst(request)
                    break
        except ConnectionError:  # the client gave up
            pass
        return resp

    async def _huge(self, request: web.BaseRequest) -> web.StreamResponse:
        headers = {hdrs.CONTENT_TYPE: HTML}
        if request.path == "/hostile/huge":
            headers[hdrs.CONTENT_LENGTH] = str(HUGE_BYTES)
        resp = web.StreamResponse(headers=headers)
        await resp.prepare(request)
        chunk = self._huge_chunk
        try:
            for _ in range(HUGE_BYTES // len(chunk)):
                await resp.write(chunk)
                if await self._pause(0):
                    _rst(request)
                    break
        except ConnectionError:  # the client hit its cap and closed
            pass
        return resp

    async def _gzip_bomb(self, request: web.BaseRequest) -> web.StreamResponse:
        body = gzip_bomb()
        return web.Response(body=body, headers={hdrs.CONTENT_TYPE: HTML, hdrs.CONTENT_ENCODING: "gzip"})

    async def _redirect_nowhere(self, request: web.BaseRequest) -> web.StreamResponse:
        return web.Response(status=302, body=b"<h1>302 without Location</h1>", headers={hdrs.CONTENT_TYPE: HTML})

    async def _as_png_route(self, request: web.BaseRequest) -> web.StreamResponse:
        return web.Response(body=self._as_png, headers={hdrs.CONTENT_TYPE: "image/png"})

    async def _no_content_type(self, request: web.BaseRequest) -> web.StreamResponse:
        return _NoContentTypeResponse(body=self._untyped)

    async def _binary_route(self, request: web.BaseRequest) -> web.StreamResponse:
        return web.Response(body=self._binary, headers={hdrs.CONTENT_TYPE: HTML})

    async def _bad_charset(self, request: web.BaseRequest) -> web.StreamResponse:
        body = self._static["/hostile/bad-charset"]
        return web.Response(body=body, headers={hdrs.CONTENT_TYPE: "text/html; charset=x-nonsense"})

    async def _calendar(self, request: web.BaseRequest) -> web.StreamResponse:
        try:
            month = int(request.query.get("month", "0"))
        except ValueError:
            return web.Response(status=404, body=b"<h1>404</h1>", headers={hdrs.CONTENT_TYPE: HTML})
        year, mon = divmod(month, 12)
        body = _page(
            f"calendar {year}-{mon + 1:02d}",
            f'<a href="/hostile/calendar?month={month + 1}">next month</a> <a href="{self._popular[0]}">home</a>',
        )
        return web.Response(body=body.encode(), headers={hdrs.CONTENT_TYPE: HTML})

    async def _grow(self, request: web.BaseRequest) -> web.StreamResponse:
        q = request.query.get("q", "a")
        q = "".join(c for c in q if c.isalnum()) or "a"
        body = _page(f"grow {len(q)}", f'<a href="/hostile/grow?q={q + q}">longer</a>')
        return web.Response(body=body.encode(), headers={hdrs.CONTENT_TYPE: HTML})
