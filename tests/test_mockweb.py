"""The mock web: the pure site graph, the live loopback server, hostile routes, thread and subprocess modes.

A tiny BFS crawler over the live server (aiohttp + an href regex + urljoin) must fetch exactly what
`SiteGraph.reachable` says, and the server's counts must equal `expected_requests`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import html
import json
import os
import posixpath
import random
import re
import signal
import struct
import subprocess
import sys
import time
import urllib.request
import zlib
from collections import defaultdict
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

import aiohttp
import pytest
import yarl

from frontier.errors import ConfigError
from frontier.testing import (
    HOSTILE_CANARIES,
    HOSTILE_FOUND,
    HOSTILE_ROUTES,
    MockWeb,
    MockWebProcess,
    PageKind,
    SiteGraph,
    SiteSpec,
)
from frontier.testing import hostile as H
from frontier.testing.sitegraph import QUERIES

ROOT = Path(__file__).resolve().parents[1]
SMALL = SiteSpec(pages=400, hosts=3, seed=7)
PORTS = [8001, 8002, 8003]
HREF = re.compile(rb"""href\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""", re.I)


def hrefs_of(body: bytes) -> list[str]:
    return [html.unescape(m.group(m.lastindex).decode("utf-8", "replace")) for m in HREF.finditer(body)]


def normalise(href: str, base: str) -> str | None:
    """A test-only canonicaliser, enough for the mock's link forms: http only, dot segments, unreserved
    escapes decoded, query params sorted by key, fragment dropped."""
    try:
        parts = urlsplit(urljoin(base, href.strip()))
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        return None
    if parts.scheme.lower() != "http":
        return None
    path = unquote(parts.path) or "/"
    path = posixpath.normpath(path) if "/." in path else path
    query = "&".join(sorted(parts.query.split("&"), key=lambda kv: kv.split("=", 1)[0])) if parts.query else ""
    return urlunsplit(("http", parts.netloc.lower(), path, query, ""))


# --- the pure graph ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"pages": 1}, "pages"),
        ({"hosts": 0}, "hosts"),
        ({"links_per_page": 0}, "links_per_page"),
        ({"repeat_share": 1.5}, "repeat_share"),
        ({"crawl_delay": -1.0}, "crawl_delay"),
        ({"robots_disallow": "/private/"}, "robots_disallow"),
        ({"robots_disallow": ("private",)}, "robots_disallow"),
        ({"hostile": 1}, "hostile"),
        ({"page_padding": -1}, "page_padding"),
    ],
)
def test_spec_rejects_bad_values(kwargs: dict, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        SiteSpec(**kwargs)
    assert info.value.key == key


def test_graph_is_deterministic_and_seed_dependent() -> None:
    a, b = SiteGraph(SMALL), SiteGraph(SMALL)
    assert a.reachable(PORTS) == b.reachable(PORTS)
    assert a.renderer(PORTS, 9).page(5) == b.renderer(PORTS, 9).page(5)
    assert SiteGraph(SiteSpec(pages=400, hosts=3, seed=8)).reachable(PORTS) != a.reachable(PORTS)


def test_graph_has_every_kind_and_mostly_repeat_links() -> None:
    g = SiteGraph(SiteSpec(pages=2000))
    stats = g.stats()
    for kind in PageKind:
        assert stats[f"kind_{kind.name.lower()}"] > 0, kind
    assert stats["orphans"] == 20
    popular = sum(1 for p in range(g.popular + 1, 2000) for t, _ in g.outlinks(p) if t <= g.popular)
    total = sum(len(g.outlinks(p)) for p in range(g.popular + 1, 2000))
    assert popular / total > 0.7


def test_every_page_is_reachable_except_orphans_and_robots() -> None:
    g = SiteGraph(SMALL)
    everything = g.page_urls(PORTS)
    plain = {u for u in g.reachable(PORTS, obey_robots=False) if "?" not in u}
    assert plain == everything - g.orphan_urls(PORTS)
    polite = g.reachable(PORTS)
    assert polite < g.reachable(PORTS, obey_robots=False)
    assert not any("/private/" in u for u in polite)
    assert not polite & g.orphan_urls(PORTS)
    assert any("?" in u for u in polite)  # query variants are URLs of their own
    redirects = g.page_urls(PORTS, kinds=[PageKind.REDIRECT_301, PageKind.REDIRECT_302])
    assert polite - g.reachable(PORTS, include_redirect_sources=False) == {
        u for u in polite if u.split("?")[0] in redirects
    }


def test_hostile_and_out_of_scope_flags_leave_reachable_unchanged() -> None:
    want = SiteGraph(SMALL).reachable(PORTS)
    assert SiteGraph(dataclasses.replace(SMALL, hostile=True)).reachable(PORTS) == want
    assert SiteGraph(dataclasses.replace(SMALL, out_of_scope_links=False)).reachable(PORTS) == want


def test_flags_turn_kinds_off() -> None:
    g = SiteGraph(SiteSpec(pages=1000, redirects=False, errors=False, out_of_scope_links=False))
    kinds = {g.kind(p) for p in range(1000)}
    assert kinds == {PageKind.NORMAL, PageKind.PRIVATE}
    r = g.renderer(PORTS, 9)
    hrefs = [h for p in range(1000) if g.kind(p) <= PageKind.PRIVATE for h, _ in r.hrefs(p)]
    assert not any(":9/" in h or "example.invalid" in h for h in hrefs)


def _random_order_crawl(g: SiteGraph, max_depth: int | None, rng: random.Random) -> set[str]:
    """A crawler that fetches its frontier in random order and keeps the depth of first discovery."""
    r = g.renderer(PORTS, 9)
    depth = {(0, 0): 0}
    frontier = [(0, 0)]
    fetched = set()
    while frontier:
        node = frontier.pop(rng.randrange(len(frontier)))
        page, q = node
        if g.is_disallowed(g.path(page) + ("?" + QUERIES[q] if q else "")):
            continue
        fetched.add(r.url(page, q))
        d = depth[node]
        if g.redirect_target(page) is not None:
            target = (g.redirect_target(page), 0)
            if target not in depth:
                depth[target] = d
                frontier.append(target)
        elif g.kind(page) <= PageKind.PRIVATE and (max_depth is None or d < max_depth):
            for link in g.outlinks(page):
                if link not in depth:
                    depth[link] = d + 1
                    frontier.append(link)
    return fetched


@pytest.mark.parametrize("max_depth", [0, 1, 2, 3, 5, None])
def test_depth_limit_is_exact_in_any_fetch_order(max_depth: int | None) -> None:
    g = SiteGraph(SiteSpec(pages=1500, hosts=3, seed=3))
    want = g.reachable(PORTS, max_depth=max_depth)
    for seed in range(3):
        assert _random_order_crawl(g, max_depth, random.Random(seed)) == want
    if max_depth is not None:
        depths = g.depths(PORTS)
        assert max(depths[u] for u in want) == min(max_depth, max(depths.values()))


def test_rendered_hrefs_canonicalise_to_graph_links() -> None:
    g = SiteGraph(SiteSpec(pages=600, hosts=3, seed=5, hostile=True))
    r = g.renderer(PORTS, 9)
    origins = tuple(o + "/" for o in r.origins)
    forms = set()
    for page in range(g.spec.pages):
        if g.kind(page) > PageKind.PRIVATE:
            continue
        base = r.url(page)
        want = [r.url(t, q) for t, q in g.outlinks(page)]
        got = []
        for href, _ in r.hrefs(page):
            url = normalise(html.unescape(href), base)
            if url and url.startswith(origins) and "/hostile/" not in url:
                got.append(url)
            forms.add(href.split("127.0.0.1")[0][:5] if "127.0.0.1" in href else href[:2])
        assert got == want, page
    assert {"http:", "HTTP:", "//"} <= forms  # absolute, scheme case, protocol-relative
    assert any(f.startswith(".") for f in forms) and any(f.startswith("/p") for f in forms)


def test_rendered_hrefs_agree_with_frontier_canonicalize() -> None:
    canonical = pytest.importorskip("frontier.url.canonical")
    g = SiteGraph(SiteSpec(pages=600, hosts=3, seed=5))
    r = g.renderer(PORTS, 9)
    for page in range(0, g.spec.pages, 7):
        if g.kind(page) > PageKind.PRIVATE:
            continue
        want = {r.url(t, q) for t, q in g.outlinks(page)}
        got = {canonical.canonicalize(html.unescape(h), base=r.url(page)) for h, _ in r.hrefs(page)}
        assert want <= got


def test_robots_txt_and_expected_requests() -> None:
    g = SiteGraph(SiteSpec(pages=300, robots_disallow=("/private/", "/p/1"), crawl_delay=2.5))
    assert g.robots_txt() == "User-agent: *\nDisallow: /private/\nDisallow: /p/1\nCrawl-delay: 2.5\n"
    assert g.is_disallowed("/p/17.html") and not g.is_disallowed("/p/2.html")
    expected = g.expected_requests(PORTS)
    assert set(expected.values()) == {1}
    assert {u for u in expected if u.endswith("/robots.txt")} == {f"http://127.0.0.1:{p}/robots.txt" for p in PORTS}
    assert set(expected) - {u for u in expected if u.endswith("/robots.txt")} == g.reachable(PORTS)
    assert set(g.expected_requests(PORTS, max_depth=0)) == {
        "http://127.0.0.1:8001/index.html",
        "http://127.0.0.1:8001/robots.txt",
    }
    assert not any(u.endswith("/robots.txt") for u in g.expected_requests(PORTS, obey_robots=False))


def test_import_frontier_testing_leaves_aiohttp_out() -> None:
    code = "import sys, frontier.testing; assert 'aiohttp' not in sys.modules, 'aiohttp imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=30)


# --- the live server ----------------------------------------------------------------------------


@pytest.fixture
async def web():
    async with MockWeb(SMALL) as mock:
        yield mock


@pytest.fixture
async def hostile():
    async with MockWeb(SiteSpec(pages=200, hosts=2, hostile=True)) as mock:
        yield mock


@pytest.fixture
async def session():
    # force_close: no pooled connections, so aiohttp never silently retries on a reset
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as s:
        yield s


async def get(session: aiohttp.ClientSession, url: str | yarl.URL, **kw) -> tuple[int, dict, bytes]:
    kw.setdefault("timeout", aiohttp.ClientTimeout(total=5))
    async with session.get(url, allow_redirects=False, **kw) as resp:
        return resp.status, resp.headers, await resp.read()


async def test_only_loopback_is_bound(web: MockWeb) -> None:
    assert len(set(web.ports)) == 3
    assert all(s.getsockname()[0] == "127.0.0.1" for s in web._socks)
    assert web.base_urls == [f"http://127.0.0.1:{p}" for p in web.ports]
    assert web.seed == web.base_urls[0] + "/index.html"


async def test_pages_are_served_with_their_links_and_counted(web: MockWeb, session) -> None:
    status, headers, body = await get(session, web.seed)
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    r = web.graph.renderer(web.ports, web.closed_port)
    assert hrefs_of(body) == [html.unescape(h) for h, _ in r.hrefs(0)]
    assert web.counts == {web.seed: 1}
    assert [len(t) for t in web.times.values()] == [1, 0, 0]
    page = next(p for p in range(1, 400) if web.graph.kind(p) == PageKind.NORMAL and web.graph.host_of(p) == 1)
    status, _, body = await get(session, r.url(page))
    assert status == 200 and b"Page %d" % page in body
    wrong_host = web.base_urls[2] + web.graph.path(page)
    assert (await get(session, wrong_host))[0] == 404
    assert (await get(session, web.base_urls[0] + "/p/0%d.html" % page))[0] == 404


async def test_query_order_and_escapes_serve_one_page_but_count_as_received(web: MockWeb, session) -> None:
    url = web.graph.renderer(web.ports, 0).url(1)
    bodies = []
    for suffix in ("?a=1&b=2", "?b=2&a=1", "", "#frag"):
        bodies.append((await get(session, url + suffix))[2])
    escaped = url.replace("/p/1.html", "/p/%31.html")
    bodies.append((await get(session, yarl.URL(escaped, encoded=True)))[2])
    assert len(set(bodies)) == 1
    assert web.counts == {url + "?a=1&b=2": 1, url + "?b=2&a=1": 1, url: 2, escaped: 1}


async def test_robots_txt_on_every_host(web: MockWeb, session) -> None:
    for base in web.base_urls:
        status, headers, body = await get(session, base + "/robots.txt")
        assert status == 200 and headers["Content-Type"].startswith("text/plain")
        assert body.decode() == "User-agent: *\nDisallow: /private/\n"


async def test_redirects_errors_and_orphans(web: MockWeb, session) -> None:
    g = web.graph
    r = g.renderer(web.ports, web.closed_port)
    seen = set()
    for page in range(len(g)):
        kind = g.kind(page)
        if kind in seen and not g.is_orphan(page):
            continue
        seen.add(kind)
        status, headers, body = await get(session, r.url(page))
        if kind in (PageKind.REDIRECT_301, PageKind.REDIRECT_302):
            assert status == (301 if kind == PageKind.REDIRECT_301 else 302)
            assert normalise(headers["Location"], r.url(page)) == r.url(g.redirect_target(page))
            assert body == b""
        elif kind == PageKind.NOT_FOUND:
            assert status == 404 and not hrefs_of(body)
        elif kind == PageKind.SERVER_ERROR:
            assert status == 500 and not hrefs_of(body)
        else:
            assert status == 200
    assert seen == set(PageKind)
    for url in g.orphan_urls(web.ports):
        assert (await get(session, url))[0] == 200


async def bfs_crawl(mock: MockWeb, session: aiohttp.ClientSession, max_depth: int | None) -> set[str]:
    """Level-by-level BFS: robots.txt once per host, redirects not followed (their target is a new URL
    at the same depth), links only from 200 text/html pages, scope = the mock's hosts."""
    scope = {urlsplit(b).netloc for b in mock.base_urls}
    robots: dict[str, tuple[str, ...]] = {}
    locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
    depth = {mock.seed: 0}
    fetched: set[str] = set()
    sem = asyncio.Semaphore(16)

    async def allowed(url: str) -> bool:
        parts = urlsplit(url)
        async with locks[parts.netloc]:
            if parts.netloc not in robots:
                _, _, body = await get(session, f"http://{parts.netloc}/robots.txt")
                lines = body.decode().splitlines()
                robots[parts.netloc] = tuple(x.split(":", 1)[1].strip() for x in lines if x.startswith("Disallow:"))
        return not (parts.path + ("?" + parts.query if parts.query else "")).startswith(robots[parts.netloc])

    def discover(href: str, base: str, d: int, into: list[str]) -> None:
        url = normalise(href, base)
        if url and urlsplit(url).netloc in scope and url not in depth and (max_depth is None or d <= max_depth):
            depth[url] = d
            into.append(url)

    async def visit(url: str, same: list[str], nxt: list[str]) -> None:
        if not await allowed(url):
            return
        async with sem:
            status, headers, body = await get(session, url)
        fetched.add(url)
        d = depth[url]
        if status in (301, 302):
            discover(headers["Location"], url, d, same)
        elif status == 200 and headers.get("Content-Type", "").startswith("text/html"):
            for href in hrefs_of(body):
                discover(href, url, d + 1, nxt)

    level = [mock.seed]
    while level:
        nxt: list[str] = []
        while level:
            same: list[str] = []
            await asyncio.gather(*(visit(u, same, nxt) for u in level))
            level = same
        level = nxt
    return fetched


@pytest.mark.parametrize("max_depth", [None, 2])
async def test_live_bfs_fetches_exactly_reachable(web: MockWeb, session, max_depth: int | None) -> None:
    fetched = await bfs_crawl(web, session, max_depth)
    assert fetched == web.graph.reachable(web.ports, max_depth=max_depth)
    assert web.counts == web.graph.expected_requests(web.ports, max_depth=max_depth)
    assert all(n == 1 for n in web.counts.values())


async def test_stats_route_is_not_counted_and_can_reset(web: MockWeb, session) -> None:
    await get(session, web.seed)
    status, headers, body = await get(session, web.base_urls[0] + "/__stats__")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    stats = json.loads(body)
    assert stats["counts"] == {web.seed: 1} and stats["total"] == 1
    assert stats["ports"] == web.ports and len(stats["times"][f"127.0.0.1:{web.ports[0]}"]) == 1
    stats = json.loads((await get(session, web.base_urls[0] + "/__stats__?reset=1&times=0"))[2])
    assert "times" not in stats and stats["total"] == 1
    assert web.counts == {} and all(not t for t in web.times.values())
    assert (await get(session, web.base_urls[1] + "/__stats__"))[0] == 404  # host 0 only, counted
    assert web.counts == {web.base_urls[1] + "/__stats__": 1}


async def test_closed_port_refuses_and_out_of_scope_links_exist(web: MockWeb, session) -> None:
    with pytest.raises(aiohttp.ClientConnectorError):
        await get(session, f"http://127.0.0.1:{web.closed_port}/p/1.html")
    body = (await get(session, web.seed))[2]
    assert f"http://127.0.0.1:{web.closed_port}/" in body.decode()
    assert "http://example.invalid/" in body.decode()


# --- hostile routes -----------------------------------------------------------------------------


async def test_hub_links_every_route_and_only_host_0_serves_it(hostile: MockWeb, session, web: MockWeb) -> None:
    seed_body = (await get(session, hostile.seed))[2]
    assert "/hostile/index.html" in hrefs_of(seed_body)
    status, _, body = await get(session, hostile.base_urls[0] + "/hostile/index.html")
    assert status == 200
    assert hrefs_of(body) == [r.path for r in HOSTILE_ROUTES]
    assert (await get(session, hostile.base_urls[1] + "/hostile/index.html"))[0] == 404
    assert (await get(session, web.base_urls[0] + "/hostile/index.html"))[0] == 404  # spec.hostile off
    assert "/hostile/index.html" not in hrefs_of((await get(session, web.seed))[2])


async def test_flaky_503_twice_then_200(hostile: MockWeb, session) -> None:
    url = hostile.base_urls[0] + "/hostile/flaky?id=2"
    for _ in range(2):
        status, headers, _ = await get(session, url)
        assert status == 503 and headers["Retry-After"] == "1"
    status, _, body = await get(session, url)
    assert status == 200 and "/hostile/found/flaky-2.html" in hrefs_of(body)
    assert (await get(session, hostile.base_urls[0] + "/hostile/flaky?id=3"))[0] == 503  # per id
    assert (await get(session, hostile.base_urls[0] + "/hostile/always-500"))[0] == 500
    hostile.reset()
    assert (await get(session, url))[0] == 503


async def test_resets(hostile: MockWeb, session) -> None:
    with pytest.raises(aiohttp.ClientPayloadError):
        await get(session, hostile.base_urls[0] + "/hostile/reset")
    with pytest.raises(aiohttp.ClientConnectionError):
        await get(session, hostile.base_urls[0] + "/hostile/reset-early")


async def test_hang_and_drip_need_a_total_timeout(hostile: MockWeb, session) -> None:
    t0 = time.monotonic()
    with pytest.raises(asyncio.TimeoutError):
        await get(session, hostile.base_urls[0] + "/hostile/hang", timeout=aiohttp.ClientTimeout(total=0.3))
    got = b""
    with pytest.raises(asyncio.TimeoutError):
        timeout = aiohttp.ClientTimeout(total=0.8, sock_read=5)
        async with session.get(hostile.base_urls[0] + "/hostile/drip", timeout=timeout) as resp:
            assert resp.status == 200 and resp.headers["Content-Length"] == str(H.DRIP_BYTES)
            async for chunk in resp.content.iter_any():
                got += chunk
    assert H.DRIP_CHUNK <= len(got) <= 3 * H.DRIP_CHUNK
    assert time.monotonic() - t0 < 3


@pytest.mark.parametrize(("path", "length"), [("/hostile/huge", str(H.HUGE_BYTES)), ("/hostile/huge-chunked", None)])
async def test_huge_bodies_stream(hostile: MockWeb, session, path: str, length: str | None) -> None:
    async with session.get(hostile.base_urls[0] + path) as resp:
        assert resp.status == 200 and resp.headers.get("Content-Length") == length
        assert (resp.headers.get("Transfer-Encoding") == "chunked") == (length is None)
        got = 0
        while got < 4 * 2**20:
            got += len(await resp.content.read(2**20))
    assert got >= 4 * 2**20


async def test_gzip_bomb(hostile: MockWeb) -> None:
    async with aiohttp.ClientSession(auto_decompress=False) as s:
        status, headers, body = await get(s, hostile.base_urls[0] + "/hostile/gzip-bomb")
    assert status == 200 and headers["Content-Encoding"] == "gzip"
    assert len(body) < 2 * 10**6
    assert struct.unpack("<I", body[-4:])[0] == H.BOMB_BLOCKS * H.BOMB_BLOCK > 10**9
    inflated = zlib.decompressobj(31).decompress(body, 16 * 2**20)
    assert inflated == b" " * (16 * 2**20)


async def test_redirect_routes(hostile: MockWeb, session) -> None:
    base = hostile.base_urls[0]

    async def location(path: str) -> tuple[int, str | None]:
        status, headers, _ = await get(session, base + path)
        return status, headers.get("Location")

    assert await location("/hostile/loop-a") == (302, "/hostile/loop-b")
    assert await location("/hostile/loop-b") == (302, "/hostile/loop-a")
    for hop in range(H.CHAIN_HOPS):
        assert await location(f"/hostile/chain/{hop}") == (302, f"/hostile/chain/{hop + 1}")
    assert (await location(f"/hostile/chain/{H.CHAIN_HOPS}"))[0] == 200
    assert (await location(f"/hostile/chain/{H.CHAIN_HOPS + 1}"))[0] == 404
    assert await location("/hostile/redirect-invalid") == (301, "http://example.invalid/landing.html")
    assert await location("/hostile/redirect-closed") == (302, f"http://127.0.0.1:{hostile.closed_port}/p/1.html")
    assert await location("/hostile/redirect-scheme") == (302, "ftp://example.invalid/file.txt")
    assert await location("/hostile/redirect-nowhere") == (302, None)


async def test_content_type_and_charset_routes(hostile: MockWeb, session) -> None:
    base = hostile.base_urls[0]
    status, headers, body = await get(session, base + "/hostile/as-png")
    assert headers["Content-Type"] == "image/png" and b"<html>" in body
    assert hrefs_of(body) == list(HOSTILE_CANARIES)
    status, headers, body = await get(session, base + "/hostile/no-content-type")
    assert status == 200 and "Content-Type" not in headers and b"<html>" in body
    _, headers, body = await get(session, base + "/hostile/binary")
    assert headers["Content-Type"] == "text/html; charset=utf-8" and b"\x00" in body and not hrefs_of(body)
    _, headers, body = await get(session, base + "/hostile/bad-charset")
    assert headers["Content-Type"] == "text/html; charset=x-nonsense"
    assert "/hostile/found/bad-charset.html" in hrefs_of(body)
    for path in ("/hostile/invalid-utf8", "/hostile/latin1-hrefs"):
        _, headers, body = await get(session, base + path)
        assert headers["Content-Type"] == "text/html; charset=utf-8"
        with pytest.raises(UnicodeDecodeError):
            body.decode("utf-8")
        assert f"/hostile/found/{path.rsplit('/', 1)[1]}.html" in hrefs_of(body)
    _, _, body = await get(session, base + "/hostile/malformed")
    assert b"\x00" in body and "/hostile/found/malformed.html" in hrefs_of(body)


async def test_link_routes(hostile: MockWeb, session) -> None:
    base = hostile.base_urls[0]
    r = hostile.graph.renderer(hostile.ports, hostile.closed_port)
    scope = {urlsplit(b).netloc for b in hostile.base_urls}
    for route in ("malformed", "schemes", "bad-ports", "idn", "latin1-hrefs", "invalid-utf8", "bad-charset"):
        body = (await get(session, f"{base}/hostile/{route}"))[2]
        for href in hrefs_of(body):
            url = normalise(href, f"{base}/hostile/{route}")
            if url is not None and urlsplit(url).netloc in scope:
                # every in-scope link of a hostile page is a popular page or stays under /hostile/
                assert urlsplit(url).path.startswith("/hostile/") or url in {r.url(p) for p in (1, 2, 3)}, url
    schemes = hrefs_of((await get(session, base + "/hostile/schemes"))[2])
    for prefix in ("javascript:", "mailto:", "data:", "tel:", "ftp:", "file:", "about:"):
        assert any(h.startswith(prefix) for h in schemes), prefix
    ports = hrefs_of((await get(session, base + "/hostile/bad-ports"))[2])
    assert "http://127.0.0.1:99999/p/1.html" in ports and "http://127.0.0.1:abc/p/1.html" in ports
    assert "http://b\u00fccher.example/" in hrefs_of((await get(session, base + "/hostile/idn"))[2])
    assert hrefs_of((await get(session, base + "/hostile/calendar?month=41"))[2])[0] == "/hostile/calendar?month=42"
    assert hrefs_of((await get(session, base + "/hostile/grow?q=ab"))[2]) == ["/hostile/grow?q=abab"]
    long_href = hrefs_of((await get(session, base + "/hostile/long-url"))[2])[0]
    assert len(long_href) > H.LONG_URL_CHARS
    assert (await get(session, base + long_href))[0] == 200  # served and counted, if a crawler asks
    assert hostile.counts[base + long_href] == 1
    for path in (*HOSTILE_FOUND, *HOSTILE_CANARIES):
        status, _, body = await get(session, base + path)
        assert status == 200 and not hrefs_of(body), path


async def test_found_links_survive_a_real_html_parser(hostile: MockWeb, session) -> None:
    lexbor = pytest.importorskip("selectolax.lexbor")
    base = hostile.base_urls[0]
    for found in HOSTILE_FOUND:
        name = found.rsplit("/", 1)[1].removesuffix(".html")
        if name.startswith("flaky"):
            continue
        body = (await get(session, f"{base}/hostile/{name}"))[2]
        hrefs = [a.attributes.get("href") for a in lexbor.LexborHTMLParser(body).css("a")]
        assert found in hrefs, name


async def test_close_is_prompt_with_hanging_routes_open() -> None:
    mock = MockWeb(SiteSpec(pages=50, hosts=1, hostile=True))
    await mock.start()
    base = mock.base_urls[0]
    async with aiohttp.ClientSession() as s:
        held = []
        for path in ("/hostile/hang", "/hostile/drip", "/hostile/huge", "/hostile/huge-chunked", "/hostile/hang"):
            held.append(asyncio.ensure_future(s.get(base + path)))
        await asyncio.sleep(0.3)  # all five are in the server's handlers now
        t0 = time.monotonic()
        await mock.close()
        assert time.monotonic() - t0 < 1.0
        await mock.close()  # idempotent
        results = await asyncio.gather(*held, return_exceptions=True)
        for r in results:
            if isinstance(r, aiohttp.ClientResponse):
                r.close()
    with pytest.raises(aiohttp.ClientConnectionError):
        async with aiohttp.ClientSession() as s:
            await get(s, mock.seed)


async def test_close_is_safe_without_start() -> None:
    mock = MockWeb(SiteSpec(pages=10))
    await mock.close()
    await mock.close()


# --- thread and subprocess modes -------------------------------------------------------------------


def test_serve_in_thread() -> None:
    with MockWeb.serve_in_thread(SiteSpec(pages=50, hosts=2)) as mock:
        with urllib.request.urlopen(mock.seed, timeout=5) as resp:
            assert resp.status == 200 and b"Page 0" in resp.read()
        snap = mock.snapshot()
        assert snap["counts"] == {mock.seed: 1} and snap["total"] == 1
        port = mock.ports[0]
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html", timeout=2)


def test_subprocess_prints_ports_and_answers_stats() -> None:
    spec = SiteSpec(pages=60, hosts=2, seed=4, crawl_delay=0.5, robots_disallow=())
    t0 = time.monotonic()
    with MockWebProcess(spec) as proc:
        assert len(proc.ports) == 2 and proc.seed == proc.base_urls[0] + "/index.html"
        assert proc.info["spec"]["crawl_delay"] == 0.5 and proc.info["spec"]["robots_disallow"] == []
        with urllib.request.urlopen(proc.base_urls[1] + "/robots.txt", timeout=5) as resp:
            assert resp.read() == b"User-agent: *\nCrawl-delay: 0.5\n"
        stats = proc.stats()
        assert stats["counts"] == {proc.base_urls[1] + "/robots.txt": 1}
        assert len(stats["times"][f"127.0.0.1:{proc.ports[1]}"]) == 1
        assert proc.stats(reset=True, times=False)["total"] == 1 and proc.stats()["total"] == 0
        # the child serves the same graph as one built here
        with urllib.request.urlopen(proc.seed, timeout=5) as resp:
            body = resp.read()
        assert body == SiteGraph(spec).renderer(proc.ports, proc.closed_port).page(0)
        t1 = time.monotonic()
        assert proc.close() == 0
        assert time.monotonic() - t1 < 2.0
    assert time.monotonic() - t0 < 10


def test_command_line_json_line_and_sigint() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    argv = [sys.executable, "-m", "frontier.testing.mockweb", "--pages", "30", "--hosts", "2", "--no-hostile"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        info = json.loads(proc.stdout.readline())
        assert len(info["ports"]) == 2 and info["stats_url"].endswith("/__stats__")
        with urllib.request.urlopen(info["stats_url"], timeout=5) as resp:
            assert json.loads(resp.read())["total"] == 0
        proc.send_signal(signal.SIGINT)
        assert proc.wait(5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def test_command_line_rejects_a_bad_spec(capsys: pytest.CaptureFixture[str]) -> None:
    from frontier.testing.mockweb import main

    assert main(["--pages", "1"]) == 2
    assert "pages" in capsys.readouterr().err
