"""Many host names on a few loopback addresses: one aiohttp server per address (127.0.0.2, 127.0.0.3, ...), all on
one port, each logging every request's arrival. A crawl points the names at them with network.resolve.

    with AddressWeb.serve_in_thread({"a.example.org": "127.0.0.2", ...}, pages=3) as web:
        web.resolve        # {"a.example.org": "127.0.0.2", ...} for network.resolve
        web.seeds          # ["http://a.example.org:PORT/", ...]
        web.log            # [Arrival(at, address, host, path, in_flight), ...] in arrival order

Each name serves "/" linking to "/p/1" .. "/p/<pages>" of the same name, the pages link nowhere, and
"/robots.txt" allows everything. `in_flight` is the number of requests the address was serving when this one
arrived, of the same kind (robots.txt or a page), itself included: 1 means it overlapped no other. Every response takes `latency` seconds, so
overlapping requests are seen. `overload(address, seconds)` makes an address answer 429 without Retry-After
for that long from now (a struggling server).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from aiohttp import web

from frontier.testing.mockweb import served_in_thread


class Arrival(NamedTuple):
    at: float  # time.time() when the handler began
    address: str
    host: str  # the Host header's name, without the port
    path: str
    in_flight: int  # requests of its kind (robots.txt, page) the address was serving then, this one included
    status: int


class AddressWeb:
    """The servers of `names` ({name: loopback address}); see the module docstring."""

    def __init__(self, names: Mapping[str, str], *, pages: int = 3, latency: float = 0.02) -> None:
        self.names = dict(names)
        self.pages = pages
        self.latency = latency
        self.log: list[Arrival] = []
        self.port = 0
        self._busy: dict[tuple[str, bool], int] = {}
        self._overload: dict[str, float] = {}
        self._runners: list[web.AppRunner] = []

    @property
    def resolve(self) -> dict[str, str]:
        return dict(self.names)

    @property
    def seeds(self) -> list[str]:
        return [f"http://{name}:{self.port}/" for name in self.names]

    def overload(self, address: str, seconds: float) -> None:
        """Answer 429 without Retry-After at `address` for `seconds` from now."""
        self._overload[address] = time.time() + seconds

    async def _handle(self, request: web.Request) -> web.Response:
        assert request.transport is not None
        address = request.transport.get_extra_info("sockname")[0]
        kind = (address, request.path == "/robots.txt")
        self._busy[kind] = self._busy.get(kind, 0) + 1
        try:
            now = time.time()
            status = 429 if self._overload.get(address, 0.0) > now else 200
            self.log.append(Arrival(now, address, request.host.rsplit(":", 1)[0], request.path,
                                    self._busy[kind], status))
            await asyncio.sleep(self.latency)
            if status != 200:
                return web.Response(status=status, text="slow down")
            if request.path == "/robots.txt":
                return web.Response(text="User-agent: *\nAllow: /\n", content_type="text/plain")
            links = "".join(f'<a href="/p/{i}">{i}</a>' for i in range(1, self.pages + 1)) if request.path == "/" else ""
            return web.Response(text=f"<html><body>{links}</body></html>", content_type="text/html")
        finally:
            self._busy[kind] -= 1

    async def start(self) -> AddressWeb:
        port = self.port or _free_port(sorted(set(self.names.values())))
        for address in sorted(set(self.names.values())):
            app = web.Application()
            app.router.add_route("GET", "/{tail:.*}", self._handle)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, address, port).start()
            self._runners.append(runner)
        self.port = port
        return self

    async def close(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()

    @classmethod
    @contextlib.contextmanager
    def serve_in_thread(cls, names: Mapping[str, str], **options: Any) -> Iterator[AddressWeb]:
        with served_in_thread(cls(names, **options), "addressweb", 10.0) as server:
            yield server


def _free_port(addresses: list[str]) -> int:
    """A port free on every one of `addresses` (tried a few times: another process may take one meanwhile)."""
    for _ in range(20):
        with socket.socket() as probe:
            probe.bind((addresses[0], 0))
            port = probe.getsockname()[1]
        try:
            for address in addresses:
                with socket.socket() as other:
                    other.bind((address, port))
            return port
        except OSError:
            continue
    raise OSError(f"no port free on all of {addresses}")
