"""A generated web of plain template pages: many hosts, a few of them large, every page under one URL pattern.

    with TemplateWeb.serve_in_thread(TemplateSpec(hosts=100, pages=20_000, large=(3647, 1133))) as web:
        ...  web.seed, web.urls(), web.snapshot()["counts"]

Host h (a loopback port of its own) serves "/" and pages "/sH/pN.html" for N < its size: `large` gives the first
hosts' sizes, the rest of `pages` is shared evenly by the others. Every page has the site's navigation and
footer, a title, one line of text and
`links` links labelled with their targets' numbers (the page after it, then random pages of its host, CROSS_SHARE
of them another host's page), so every body differs and has little text: a product catalogue, a forum or an API
reference has this shape. Each host's "/" links its first ten pages; host 0's also links every host's "/"
(the seed). Every page is reachable from the seed. Everything is a pure function of the spec and the URL.
"""

from __future__ import annotations

import contextlib
import random
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import xxhash
from aiohttp import web

from frontier.errors import ConfigError
from frontier.testing.mockweb import BACKLOG, HTML, SHUTDOWN_TIMEOUT, served_in_thread
from frontier.testing.sitegraph import LOOPBACK, ROBOTS_PATH

__all__ = ["TemplateSite", "TemplateSpec", "TemplateWeb"]

CROSS_SHARE = 0.01  # of a page's links, those to another host's page

_WORDS = ("amber", "basin", "cedar", "delta", "ember", "fjord", "grove", "harbor", "inlet", "juniper", "kestrel",
          "lagoon", "meadow", "nectar", "orchard", "prairie", "quarry", "ridge", "summit", "tundra", "upland",
          "valley", "willow", "yarrow", "zephyr", "copper", "marble", "granite", "saffron", "indigo", "scarlet",
          "cobalt", "bronze", "silver", "linen", "velvet", "canvas", "timber", "pebble", "lantern")


@dataclass(frozen=True, kw_only=True)
class TemplateSpec:
    """The shape of the web; see the module docstring."""

    hosts: int = 100
    pages: int = 20_000
    large: tuple[int, ...] = (3647, 1133)
    links: int = 30
    seed: int = 1

    def __post_init__(self) -> None:
        for key, low, high in (("hosts", 1, 1000), ("pages", 1, 10_000_000), ("links", 1, 10_000)):
            value = getattr(self, key)
            if type(value) is not int or not low <= value <= high:
                raise ConfigError(f"must be an int in [{low}, {high}], got {value!r}", key)
        large = tuple(self.large)
        if len(large) > self.hosts or sum(large) > self.pages or any(type(n) is not int or n < 1 for n in large):
            raise ConfigError(f"at most `hosts` sizes >= 1 summing to at most `pages`, got {large!r}", "large")
        if len(large) == self.hosts and sum(large) != self.pages:
            raise ConfigError("the sizes of every host must sum to `pages`", "large")
        object.__setattr__(self, "large", large)


class TemplateSite:
    """The pages of a `TemplateSpec`, by host number and path."""

    def __init__(self, spec: TemplateSpec) -> None:
        self.spec = spec
        rest, others = spec.pages - sum(spec.large), spec.hosts - len(spec.large)
        self.sizes = list(spec.large) + [rest // others + (i < rest % others) for i in range(others)]

    def paths(self, host: int) -> list[str]:
        """The paths a complete crawl fetches on `host` ("/" and every page)."""
        return ["/"] + [f"/s{host}/p{n}.html" for n in range(self.sizes[host])]

    def _title(self, host: int, n: int) -> str:
        rng = random.Random(xxhash.xxh3_64_intdigest(f"title {self.spec.seed} {host} {n}".encode()))
        return " ".join(rng.choice(_WORDS) for _ in range(3)).title() + f" {host}-{n}"

    def respond(self, host: int, path: str, origins: list[str]) -> tuple[int, bytes]:
        """(status, body) of a GET of `path` on `host`; `origins`: every host's "http://127.0.0.1:PORT"."""
        if path == ROBOTS_PATH:
            return 200, b"User-agent: *\nAllow: /\n"
        size = self.sizes[host]
        if path == "/":
            links = [(f"/s{host}/p{n}.html", self._title(host, n)) for n in range(min(10, size))]
            if host == 0:
                links += [(f"{origin}/", f"Site {h}") for h, origin in enumerate(origins)]
            return 200, _page(f"Site {host}", "The front page.", links)
        prefix = f"/s{host}/p"
        number = path[len(prefix):-len(".html")] if path.startswith(prefix) and path.endswith(".html") else ""
        if not number.isdigit() or int(number) >= size or (len(number) > 1 and number[0] == "0"):
            return 404, _page("Not found", "No such page.", [])
        n = int(number)
        rng = random.Random(xxhash.xxh3_64_intdigest(f"page {self.spec.seed} {host} {n}".encode()))
        targets = [(host, (n + 1) % size)]
        for _ in range(self.spec.links - 1):
            if rng.random() < CROSS_SHARE and len(self.sizes) > 1:
                other = rng.randrange(len(self.sizes))
                targets.append((other, rng.randrange(self.sizes[other])))
            else:
                targets.append((host, rng.randrange(size)))
        links = [((f"{origins[h]}" if h != host else "") + f"/s{h}/p{m}.html", f"Page {h}-{m}") for h, m in targets]
        line = " ".join(rng.choice(_WORDS) for _ in range(10)) + "."
        return 200, _page(self._title(host, n), line.capitalize(), links)


_NAV = ("<nav>Home | Catalogue | Forum | Reference | Help | Contact | Sign in | Register | Search the site</nav>")
_FOOTER = ("<footer>Every page of this site is generated from one template. Terms of use, privacy notice, cookie "
           "settings, accessibility statement, about this site, report a problem with this page.</footer>")


def _page(title: str, line: str, links: list[tuple[str, str]]) -> bytes:
    items = "\n".join(f'<li><a href="{href}">{text}</a></li>' for href, text in links)
    return (f"<!doctype html>\n<html><head><title>{title}</title></head><body>\n{_NAV}\n<h1>{title}</h1>\n"
            f"<p>{line}</p>\n<ul>\n{items}\n</ul>\n{_FOOTER}\n</body></html>\n").encode()


class TemplateWeb:
    """The running web: one loopback port per host. After start: `base_urls`, `seed`, `counts` (by URL as
    received), read from another thread through `snapshot()`."""

    def __init__(self, spec: TemplateSpec | None = None) -> None:
        self.spec = spec if spec is not None else TemplateSpec()
        self.site = TemplateSite(self.spec)
        self.base_urls: list[str] = []
        self.seed = ""
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._runners: list[web.ServerRunner] = []

    async def start(self) -> TemplateWeb:
        for _ in range(self.spec.hosts):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._socks.append(sock)
            sock.bind((LOOPBACK, 0))
            sock.setblocking(False)
        self.base_urls = [f"http://{LOOPBACK}:{s.getsockname()[1]}" for s in self._socks]
        self.seed = self.base_urls[0] + "/"
        for host, sock in enumerate(self._socks):
            runner = web.ServerRunner(web.Server(self._handler(host), access_log=None), shutdown_timeout=SHUTDOWN_TIMEOUT)
            self._runners.append(runner)
            await runner.setup()
            await web.SockSite(runner, sock, backlog=BACKLOG).start()
        return self

    def _handler(self, host: int) -> Any:
        async def handle(request: web.BaseRequest) -> web.Response:
            with self._lock:
                self.counts[self.base_urls[host] + request.raw_path] += 1
            status, body = self.site.respond(host, request.path, self.base_urls)
            kind = "text/plain" if request.path == ROBOTS_PATH else HTML
            return web.Response(status=status, body=body, content_type=kind.split(";")[0])

        return handle

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            for runner in self._runners:
                await runner.cleanup()
        for sock in self._socks:
            sock.close()

    @classmethod
    @contextlib.contextmanager
    def serve_in_thread(cls, spec: TemplateSpec | None = None, *, timeout: float = 60.0) -> Iterator[TemplateWeb]:
        """Serve from a daemon thread with its own event loop."""
        with served_in_thread(cls(spec), "templateweb-loop", timeout) as served:
            yield served

    def snapshot(self) -> dict[str, Any]:
        """A copy of the counts, safe from any thread: {"counts", "total"}."""
        with self._lock:
            return {"counts": dict(self.counts), "total": sum(self.counts.values())}

    def urls(self) -> list[str]:
        """Every URL a complete crawl fetches (robots.txt excluded)."""
        return [base + path for h, base in enumerate(self.base_urls) for path in self.site.paths(h)]
