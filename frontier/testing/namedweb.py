"""Many host names on a few loopback addresses: the web a crawl sees through network.resolve.

    with NamedWeb.serve_in_thread({"a.example.org": "127.0.0.2", "b.example.org": "127.0.0.3"}, pages=3) as web:
        web.port, web.seeds, web.resolve     # one port on every address; network.resolve's mapping
        web.requests()                       # [Arrival(...)], in arrival order, from any thread

One aiohttp server per address, all on one port, each serving every name mapped to it, told apart by the
Host header as a shared server does. Each name's site: "/" links to /p1 .. /p<pages>, each page to the next
and back to "/", plus `links` (absolute URLs, e.g. to a name that never resolves; "{port}" in one is the web's
port) on "/"; its robots.txt is
`robots[name]` (default: allow all). A request for a name not mapped to the address it arrived at is answered
421 Misdirected Request, so a connection that went to the wrong server fails loudly.

Every request is logged as an `Arrival`: monotonic time, the address it arrived at, its Host header, path, and
how many connections that address had open at that moment (keep-alive ones included).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from aiohttp import web

from frontier.testing.mockweb import served_in_thread

__all__ = ["Arrival", "NamedWeb"]

BIND_ATTEMPTS = 20  # free ports tried until one is free on every address


@dataclass(frozen=True, slots=True)
class Arrival:
    """One request as a server saw it."""

    at: float  # time.monotonic()
    address: str  # the local address it arrived at
    host: str  # its Host header, "name:port"
    path: str
    open_connections: int  # connections open to that address then


class NamedWeb:
    """Serves `names` ({name: loopback address}); see the module docstring. `start()`/`close()` on a loop,
    or `serve_in_thread`."""

    def __init__(self, names: Mapping[str, str], *, pages: int = 3, robots: Mapping[str, str] | None = None,
                 links: Sequence[str] = ()) -> None:
        self.names = dict(names)
        self.pages = pages
        self.robots = dict(robots or {})
        self.links = tuple(links)
        self.port = 0
        self._runners: list[web.AppRunner] = []
        self._by_address: dict[str, web.AppRunner] = {}
        self._log: list[Arrival] = []
        self._lock = threading.Lock()

    @property
    def seeds(self) -> list[str]:
        return [f"http://{name}:{self.port}/" for name in self.names]

    @property
    def resolve(self) -> dict[str, str]:
        """network.resolve's value for this web."""
        return dict(self.names)

    def requests(self) -> list[Arrival]:
        """The requests so far, in arrival order (safe from any thread)."""
        with self._lock:
            return list(self._log)

    @classmethod
    @contextlib.contextmanager
    def serve_in_thread(cls, names: Mapping[str, str], *, timeout: float = 30.0,
                        **kwargs: object) -> Iterator[NamedWeb]:
        """Serve from a daemon thread with its own event loop."""
        with served_in_thread(cls(names, **kwargs), "namedweb-loop", timeout) as served:  # type: ignore[arg-type]
            yield served

    async def start(self) -> NamedWeb:
        addresses = list(dict.fromkeys(self.names.values()))
        for _ in range(BIND_ATTEMPTS):
            socks = _bind_all(addresses)
            if socks is not None:
                break
        else:
            raise OSError(f"no port free on every one of {addresses}")
        self.port = socks[0].getsockname()[1]
        for address, sock in zip(addresses, socks):
            runner = web.AppRunner(self._app(address), handle_signals=False, access_log=None)
            await runner.setup()
            self._runners.append(runner)
            self._by_address[address] = runner
            await web.SockSite(runner, sock).start()
        return self

    async def close(self) -> None:
        runners, self._runners = self._runners, []
        self._by_address.clear()
        for runner in runners:
            await runner.cleanup()

    def _app(self, address: str) -> web.Application:
        async def page(request: web.Request) -> web.Response:
            name = request.host.rpartition(":")[0] or request.host
            runner = self._by_address.get(address)
            server = runner.server if runner is not None else None
            with self._lock:
                self._log.append(Arrival(time.monotonic(), address, request.host, request.path,
                                         len(server.connections) if server is not None else 0))
            if self.names.get(name) != address:
                return web.Response(status=421, text=f"{name} is not served at {address}")
            if request.path == "/robots.txt":
                return web.Response(text=self.robots.get(name, "User-agent: *\nAllow: /\n"), content_type="text/plain")
            return web.Response(text=self._page(request.path), content_type="text/html")

        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", page)
        return app

    def _page(self, path: str) -> str:
        if path == "/":
            hrefs = [f"/p{i}" for i in range(1, self.pages + 1)] + [link.replace("{port}", str(self.port))
                                                                   for link in self.links]
        elif path.startswith("/p") and path[2:].isdigit() and 1 <= int(path[2:]) <= self.pages:
            n = int(path[2:])
            hrefs = ["/"] + ([f"/p{n + 1}"] if n < self.pages else [])
        else:
            return "<html><body>not found</body></html>"
        return "<html><body>" + "".join(f'<a href="{h}">{h}</a>' for h in hrefs) + "</body></html>"


def _bind_all(addresses: list[str]) -> list[socket.socket] | None:
    """Sockets bound to one free port on every address, or None when the port is taken on one of them."""
    socks: list[socket.socket] = []
    try:
        for address in addresses:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((address, socks[0].getsockname()[1] if len(socks) > 1 else 0))
            sock.listen(128)
            sock.setblocking(False)
    except OSError:
        for sock in socks:
            sock.close()
        return None
    return socks
