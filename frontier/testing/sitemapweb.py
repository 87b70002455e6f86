"""A two-host site on loopback whose pages are reachable only through its sitemaps, every request counted.

    async with SitemapWeb() as web:     # in the running event loop; two ports on 127.0.0.1
        web.seeds, web.hosts, web.counts["/hidden/3" on host 0], web.expected_hidden

Host 0 ("a") names its sitemap index in robots.txt (and a sitemap outside the crawl's scope). The index
lists: a .xml.gz file (gzip bytes, no Content-Encoding), a file served with Content-Encoding: gzip, a
nested index (level 2) whose own nested index (level 3) lists one more sitemap (level 4: past
frontier.crawl.sitemaps.MAX_LEVEL, never fetched), a sitemap that redirects to another, a gzip bomb, a
malformed file and one robots.txt disallows. Host 1 ("b") has a robots.txt without Sitemap lines, so its
/sitemap.xml is tried; it lists, besides its pages, /hidden/b-moved with <priority>0.9</priority> and
<changefreq>hourly</changefreq>, which redirects (301) to /hidden/b-target (the hints must follow the page). Each host's "/" links to nothing; `expected_hidden` are the pages a sitemap crawl
must fetch and a crawl without sitemaps must not.
"""

from __future__ import annotations

import gzip
import random
import string
import zlib
from collections import Counter
from typing import Any

from aiohttp import web

from frontier.testing.sitegraph import LOOPBACK

__all__ = ["BOMB_BYTES", "MOVED_HINTS", "SitemapWeb", "urlset", "sitemapindex"]

BOMB_BYTES = 64 * 1024 * 1024  # the bomb's spaces, decompressed (about 64 KB gzipped): past the 50 MiB cap
NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
MOVED_HINTS = "<priority>0.9</priority><changefreq>hourly</changefreq>"  # host b's /hidden/b-moved (a 301)


def urlset(urls: list[str], hinted: dict[str, str] | None = None) -> bytes:
    """A sitemap listing `urls`, with an image extension whose <image:loc> is not a page, then `hinted`'s (URL ->
    the entry's other elements, e.g. "<priority>0.9</priority>")."""
    items = "".join(f"<url><loc>{u}</loc><lastmod>2024-01-01</lastmod><image:image><image:loc>{u}.png</image:loc>"
                    f"</image:image></url>" for u in urls)
    items += "".join(f"<url><loc>{u}</loc>{elements}</url>" for u, elements in (hinted or {}).items())
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{NS}" '
            f'xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">{items}</urlset>').encode()


def sitemapindex(urls: list[str]) -> bytes:
    items = "".join(f"<sitemap><loc>{u}</loc></sitemap>" for u in urls)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex xmlns="{NS}">{items}</sitemapindex>'.encode()


def _page(name: str) -> bytes:
    """A page of its own words (so no two pages look like near-duplicates to a trap detector)."""
    rng = random.Random(name)
    words = " ".join("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9)))
                     for _ in range(120))
    return f"<html><head><title>{name}</title></head><body><p>{words}</p></body></html>".encode()


def _bomb() -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b" " * (1024 * 1024)
    return b"".join(c.compress(block) for _ in range(BOMB_BYTES // len(block))) + c.flush()


class SitemapWeb:
    """See the module docstring. `counts[(host_index, path)]`: requests received."""

    def __init__(self, *, pages: int = 12, outside_port: int = 9) -> None:
        self.pages = pages
        self.outside_port = outside_port
        self.counts: Counter[tuple[int, str]] = Counter()
        self.ports: list[int] = []
        self._runners: list[web.AppRunner] = []
        self._routes: list[dict[str, tuple[int, dict[str, str], bytes]]] = [{}, {}]

    @property
    def hosts(self) -> list[str]:
        return [f"{LOOPBACK}:{port}" for port in self.ports]

    @property
    def seeds(self) -> list[str]:
        return [f"http://{host}/" for host in self.hosts]

    def url(self, host: int, path: str) -> str:
        return f"http://{self.hosts[host]}{path}"

    @property
    def expected_hidden(self) -> set[tuple[int, str]]:
        """(host, path) of every page only a sitemap leads to, robots.txt allowing, within the level bound."""
        a = {(0, f"/hidden/{kind}-{i}") for kind in ("gz", "enc", "nested", "moved") for i in range(self.pages)}
        return a | {(1, f"/hidden/b-{i}") for i in range(self.pages)} | {(1, "/hidden/b-moved"), (1, "/hidden/b-target")}

    def never(self) -> set[tuple[int, str]]:
        """(host, path) a crawl must never request: past the level bound, disallowed, never listed."""
        return {(0, f"/hidden/deep-{i}") for i in range(self.pages)} | {(0, "/private/1"), (0, "/private/sitemap.xml")}

    def routes(self) -> set[tuple[int, str]]:
        """(host, path) of everything served (other paths are 404: a soft-404 probe's, say)."""
        return {(host, path) for host, routes in enumerate(self._routes) for path in routes}

    def _pages(self, kind: str, host: int = 0) -> list[str]:
        return [self.url(host, f"/hidden/{kind}-{i}") for i in range(self.pages)]

    def _build(self) -> None:
        a, b = self._routes
        xml = {"Content-Type": "application/xml"}
        html = {"Content-Type": "text/html"}
        a["/robots.txt"] = (200, {"Content-Type": "text/plain"}, (
            f"User-agent: *\nDisallow: /private/\n\nSitemap: {self.url(0, '/sitemap_index.xml')}\n"
            f"Sitemap: http://{LOOPBACK}:{self.outside_port}/outside.xml\n").encode())
        a["/"] = (200, html, b"<html><body>nothing linked here</body></html>")
        a["/sitemap_index.xml"] = (200, xml, sitemapindex([self.url(0, p) for p in (
            "/sm/gz.xml.gz", "/sm/enc.xml", "/sm/nested-index.xml", "/sm/moved.xml", "/sm/bomb.xml.gz",
            "/sm/bad.xml", "/private/sitemap.xml")]))
        a["/sm/gz.xml.gz"] = (200, {"Content-Type": "application/x-gzip"}, gzip.compress(urlset(self._pages("gz"))))
        a["/sm/enc.xml"] = (200, {**xml, "Content-Encoding": "gzip"}, gzip.compress(urlset(self._pages("enc"))))
        a["/sm/nested-index.xml"] = (200, xml, sitemapindex([self.url(0, "/sm/nested.xml"),
                                                               self.url(0, "/sm/nested2-index.xml")]))
        a["/sm/nested.xml"] = (200, xml, urlset(self._pages("nested") + [self.url(0, "/private/1")]))
        a["/sm/nested2-index.xml"] = (200, xml, sitemapindex([self.url(0, "/sm/deep.xml")]))
        a["/sm/deep.xml"] = (200, xml, urlset(self._pages("deep")))
        a["/sm/moved.xml"] = (301, {"Location": "/sm/moved-here.xml"}, b"")
        a["/sm/moved-here.xml"] = (200, xml, urlset(self._pages("moved")))
        a["/sm/bomb.xml.gz"] = (200, {"Content-Type": "application/x-gzip"}, _bomb())
        a["/sm/bad.xml"] = (200, xml, b'<?xml version="1.0"?><urlset><url><loc>' + self.url(0, "/x").encode()
                            + b"</loc></url><url><loc>unclosed</url></urlset>")
        for kind in ("gz", "enc", "nested", "moved", "deep"):
            for i in range(self.pages):
                a[f"/hidden/{kind}-{i}"] = (200, html, _page(f"{kind}-{i}"))
        a["/private/1"] = (200, html, _page("private"))
        b["/robots.txt"] = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow:\n")
        b["/"] = (200, html, b"<html><body>nothing linked here</body></html>")
        b["/sitemap.xml"] = (200, xml, urlset(self._pages("b", 1), {self.url(1, "/hidden/b-moved"): MOVED_HINTS}))
        b["/hidden/b-moved"] = (301, {"Location": "/hidden/b-target"}, b"")
        b["/hidden/b-target"] = (200, html, _page("b-target"))
        for i in range(self.pages):
            b[f"/hidden/b-{i}"] = (200, html, _page(f"b-{i}"))

    def _handler(self, host: int) -> Any:
        async def handle(request: web.Request) -> web.Response:
            self.counts[(host, request.path)] += 1
            status, headers, body = self._routes[host].get(request.path, (404, {}, b"not found"))
            return web.Response(status=status, headers=headers, body=body)

        return handle

    async def __aenter__(self) -> SitemapWeb:
        try:
            for host in range(2):
                app = web.Application()
                app.router.add_route("GET", "/{tail:.*}", self._handler(host))
                runner = web.AppRunner(app, access_log=None)
                await runner.setup()
                self._runners.append(runner)
                site = web.TCPSite(runner, LOOPBACK, 0)
                await site.start()
                self.ports.append(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
            self._build()
        except BaseException:
            await self.close()
            raise
        return self

    async def close(self) -> None:
        runners, self._runners = self._runners, []
        for runner in runners:
            await runner.cleanup()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
