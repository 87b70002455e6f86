"""The mock web: a `SiteGraph` served on several loopback ports by aiohttp, every request counted.

Host i of the graph is "127.0.0.1:ports[i]"; only 127.0.0.1 is ever bound. Three ways to run it:

    async with MockWeb(SiteSpec(pages=500)) as web:          # in the running event loop
        ...  web.seed, web.counts, web.times

    with MockWeb.serve_in_thread(spec) as web:               # own loop in a daemon thread (sync code)
        ...

    python -m frontier.testing.mockweb --pages 20000 --hosts 3 --links-per-page 60
        prints one JSON line {"ports": [...], "base_urls": [...], "seed": ..., "stats_url": ...} and
        serves until SIGTERM/SIGINT (or until its parent process dies). `MockWebProcess` runs it.

What is counted: every request that reaches the handler, keyed "http://127.0.0.1:PORT" + the request
target exactly as received (path and query, percent-escapes untouched), robots.txt included; only
"GET /__stats__" on host 0 is not counted. `times["127.0.0.1:PORT"]` lists time.monotonic() at the
start of each request (CLOCK_MONOTONIC: comparable across processes on one Linux machine). Requests
aiohttp rejects before the handler (a request line over 256 KiB) are not counted.

What is served: see `frontier.testing.sitegraph` (pages, kinds, links) and `frontier.testing.hostile`
(the /hostile/ routes). Pages are looked up by decoded path with dot segments resolved; the query never
changes the page. Unknown paths, and pages asked of the wrong host, are 404. "/robots.txt" is the
graph's robots.txt on every host (text/plain). A port nobody listens on (`closed_port`, held bound
but not listening, so connections to it are refused) is the target of the out-of-scope links.

A crawl of it: seed `web.seed`; scope allowed_hosts = ["127.0.0.1:PORT" for each of `web.ports`] (not
the domain "127.0.0.1", which admits every port, the closed one included); private addresses allowed.
A correct crawl leaves `web.counts == web.graph.expected_requests(web.ports, ...)` plus /hostile/ keys.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from aiohttp import hdrs, web

from frontier.errors import ConfigError
from frontier.testing.hostile import HostileRoutes
from frontier.testing.sitegraph import (
    HOSTILE_PREFIX,
    LOOPBACK,
    ROBOTS_PATH,
    STATS_PATH,
    PageKind,
    PageRenderer,
    SiteGraph,
    SiteSpec,
)

HTML = "text/html; charset=utf-8"
MAX_LINE_SIZE = 256 * 2**10  # request lines up to this are counted (the hostile long URL is 100 KB)
SHUTDOWN_TIMEOUT = 0.25  # seconds aiohttp waits for a handler at shutdown before cancelling it
BACKLOG = 1024

_NOT_FOUND = b"<!DOCTYPE html>\n<html><body><h1>404 not found</h1></body></html>\n"
_SERVER_ERROR = b"<!DOCTYPE html>\n<html><body><h1>500 internal server error</h1></body></html>\n"


def new_loop() -> asyncio.AbstractEventLoop:
    """A new uvloop event loop (asyncio's if uvloop is missing): the loop the mock servers run on."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class _Startable(Protocol):
    async def start(self) -> object: ...

    async def close(self) -> object: ...


_Server = TypeVar("_Server", bound=_Startable)


@contextlib.contextmanager
def served_in_thread(server: _Server, name: str, timeout: float) -> Iterator[_Server]:
    """Run `server` (its `start()` and `close()` coroutines) on an event loop of a daemon thread of its own."""
    loop = new_loop()
    thread = threading.Thread(target=loop.run_forever, name=name, daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(server.start(), loop).result(timeout)
        yield server
    finally:
        try:
            asyncio.run_coroutine_threadsafe(server.close(), loop).result(timeout)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout)
            if not thread.is_alive():
                loop.close()


class MockWeb:
    """A running mock web. Build with plain values; `start()`/`close()` or `async with`.

    After start: `ports`, `base_urls` ("http://127.0.0.1:PORT"), `seed` (index URL), `closed_port`,
    `counts` (Counter by URL as received), `times` ("127.0.0.1:PORT" -> monotonic request start times),
    `graph`, `spec`. Mutated on the loop thread; from another thread read them via `snapshot()`.

    `graph` may be passed to reuse one built elsewhere (building 20k pages takes about a second);
    then `spec` must be None or equal to `graph.spec`. `ports` binds fixed ports instead of free ones.
    """

    def __init__(
        self,
        spec: SiteSpec | None = None,
        *,
        ports: Sequence[int] | None = None,
        graph: SiteGraph | None = None,
        shutdown_timeout: float = SHUTDOWN_TIMEOUT,
    ) -> None:
        self._runners: list[web.ServerRunner] = []
        self._socks: list[socket.socket] = []
        self._closed_sock: socket.socket | None = None
        self._closing: asyncio.Event | None = None
        self._started = self._closed = False
        if graph is None:
            graph = SiteGraph(spec)
        elif spec is not None and spec != graph.spec:
            raise ConfigError("spec and graph.spec differ; pass one of them", "spec")
        self.graph = graph
        self.spec = graph.spec
        if ports is not None and (
            len(ports) != self.spec.hosts or not all(type(p) is int and 0 <= p < 65536 for p in ports)
        ):
            raise ConfigError(f"expected {self.spec.hosts} ports in [0, 65535], got {ports!r}", "ports")
        self._want_ports = list(ports) if ports is not None else [0] * self.spec.hosts
        self._shutdown_timeout = shutdown_timeout
        self.ports: list[int] = []
        self.base_urls: list[str] = []
        self.seed = ""
        self.closed_port = 0
        self.counts: Counter[str] = Counter()
        self.times: dict[str, list[float]] = {}
        self._lock = threading.Lock()
        self._hostile: HostileRoutes | None = None

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> MockWeb:
        """Bind the ports and start serving. Raises OSError if a fixed port is taken."""
        if self._started:
            raise RuntimeError("MockWeb.start() called twice")
        self._started = True
        self._closing = asyncio.Event()
        closed = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._closed_sock = closed
        closed.bind((LOOPBACK, 0))  # bound, never listening: connections are refused
        self.closed_port = closed.getsockname()[1]
        for port in self._want_ports:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((LOOPBACK, port))
            sock.setblocking(False)
        self.ports = [s.getsockname()[1] for s in self._socks]
        self.base_urls = [f"http://{LOOPBACK}:{p}" for p in self.ports]
        self.seed = self.base_urls[0] + self.graph.path(0)
        self.times = {f"{LOOPBACK}:{p}": [] for p in self.ports}
        renderer = self.graph.renderer(self.ports, self.closed_port)
        if self.spec.hostile:
            self._hostile = HostileRoutes(renderer, self._pause)
        robots = self.graph.robots_txt().encode()
        for host, sock in enumerate(self._socks):
            server = web.Server(
                self._make_handler(host, renderer, robots),
                handler_cancellation=True,
                access_log=None,
                max_line_size=MAX_LINE_SIZE,
                max_field_size=MAX_LINE_SIZE,
            )
            runner = web.ServerRunner(server, shutdown_timeout=self._shutdown_timeout)
            self._runners.append(runner)
            await runner.setup()
            await web.SockSite(runner, sock, backlog=BACKLOG).start()
        return self

    async def close(self) -> None:
        """Stop serving within about a second, hanging routes included. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._closing is not None:
            self._closing.set()
            await asyncio.sleep(0)  # let handlers waiting in _pause() see it
        for runner in self._runners:
            # A handler blocked writing to a client that stopped reading (huge bodies) would hold
            # the shutdown for shutdown_timeout; abort every connection instead.
            for conn in runner.server.connections if runner.server is not None else ():
                if conn.transport is not None:
                    conn.transport.abort()
        try:
            await asyncio.gather(*(r.cleanup() for r in self._runners), return_exceptions=True)
        finally:
            for sock in self._socks:
                sock.close()
            if self._closed_sock is not None:
                self._closed_sock.close()

    async def __aenter__(self) -> MockWeb:
        try:
            return await self.start()
        except BaseException:
            await self.close()
            raise

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @classmethod
    @contextlib.contextmanager
    def serve_in_thread(
        cls,
        spec: SiteSpec | None = None,
        *,
        ports: Sequence[int] | None = None,
        graph: SiteGraph | None = None,
        timeout: float = 30.0,
    ) -> Iterator[MockWeb]:
        """Serve from a daemon thread with its own event loop (uvloop when installed).

        Read `counts`/`times` through `snapshot()` while it runs: the loop thread writes them.
        """
        with served_in_thread(cls(spec, ports=ports, graph=graph), "mockweb-loop", timeout) as mock:
            yield mock

    # --- stats ------------------------------------------------------------------------------------

    def snapshot(self, *, reset: bool = False) -> dict[str, Any]:
        """Copies of counts and times, safe from any thread: {"counts": {...}, "times": {...}, "total": n}."""
        with self._lock:
            snap = {
                "counts": dict(self.counts),
                "times": {h: list(t) for h, t in self.times.items()},
                "total": sum(self.counts.values()),
            }
            if reset:
                self._reset_locked()
        return snap

    def reset(self) -> None:
        """Forget counts, times and hostile per-id state (flaky counters)."""
        with self._lock:
            self._reset_locked()

    def _reset_locked(self) -> None:
        self.counts.clear()
        for t in self.times.values():
            t.clear()
        if self._hostile is not None:
            self._hostile.reset()

    def _stats_response(self, request: web.BaseRequest) -> web.Response:
        query = request.query
        snap = self.snapshot(reset=query.get("reset") == "1")
        if query.get("times") == "0":
            del snap["times"]
        snap.update(ports=self.ports, closed_port=self.closed_port, seed=self.seed)
        return web.Response(text=json.dumps(snap), content_type="application/json")

    # --- serving ------------------------------------------------------------------------------------

    async def _pause(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True (at once) when the server is closing."""
        closing = self._closing
        assert closing is not None
        if closing.is_set():
            return True
        if seconds <= 0:
            await asyncio.sleep(0)
            return closing.is_set()
        try:
            async with asyncio.timeout(seconds):
                await closing.wait()
        except TimeoutError:
            return False
        return True

    def _make_handler(self, host: int, renderer: PageRenderer, robots: bytes) -> Any:
        graph = self.graph
        kinds = graph.page_kinds
        hosts = graph.page_hosts
        base = self.base_urls[host]
        times = self.times[f"{LOOPBACK}:{self.ports[host]}"]
        counts = self.counts
        lock = self._lock
        hostile = self._hostile if host == 0 else None
        monotonic = time.monotonic
        html_headers = {hdrs.CONTENT_TYPE: HTML}
        robots_headers = {hdrs.CONTENT_TYPE: "text/plain; charset=utf-8"}

        async def handle(request: web.BaseRequest) -> web.StreamResponse:
            raw = request.raw_path
            if host == 0 and raw.startswith(STATS_PATH) and request.path == STATS_PATH:
                return self._stats_response(request)
            now = monotonic()
            with lock:
                counts[base + raw] += 1
                times.append(now)
            path = request.path
            if path == ROBOTS_PATH:
                return web.Response(body=robots, headers=robots_headers)
            if hostile is not None and path.startswith(HOSTILE_PREFIX):
                return await hostile.handle(request, path)
            page = graph.page_at(path)
            if page is None or hosts[page] != host:
                return web.Response(status=404, body=_NOT_FOUND, headers=html_headers)
            kind = kinds[page]
            if kind <= PageKind.PRIVATE:
                return web.Response(body=renderer.page(page), headers=html_headers)
            if kind == PageKind.NOT_FOUND:
                return web.Response(status=404, body=_NOT_FOUND, headers=html_headers)
            if kind == PageKind.SERVER_ERROR:
                return web.Response(status=500, body=_SERVER_ERROR, headers=html_headers)
            status = 301 if kind == PageKind.REDIRECT_301 else 302
            return web.Response(status=status, headers={hdrs.LOCATION: renderer.location(page)})

        return handle


# --- a mock web in a child process ----------------------------------------------------------------


def spec_to_argv(spec: SiteSpec) -> list[str]:
    """Command-line arguments of `python -m frontier.testing.mockweb` that rebuild `spec`."""
    argv = [
        f"--pages={spec.pages}",
        f"--hosts={spec.hosts}",
        f"--links-per-page={spec.links_per_page}",
        f"--repeat-share={spec.repeat_share!r}",
        f"--seed={spec.seed}",
        f"--page-padding={spec.page_padding}",
        "--hostile" if spec.hostile else "--no-hostile",
        "--redirects" if spec.redirects else "--no-redirects",
        "--errors" if spec.errors else "--no-errors",
        "--out-of-scope-links" if spec.out_of_scope_links else "--no-out-of-scope-links",
    ]
    if spec.crawl_delay is not None:
        argv.append(f"--crawl-delay={spec.crawl_delay!r}")
    if spec.robots_disallow:
        argv += [f"--disallow={p}" for p in spec.robots_disallow]
    else:
        argv.append("--no-disallow")
    return argv


def fetch_stats(stats_url: str, *, reset: bool = False, times: bool = True, timeout: float = 30.0) -> dict[str, Any]:
    """GET /__stats__ of a mock web (no aiohttp needed): counts, times, total, ports, closed_port, seed."""
    params = [p for p, on in (("reset=1", reset), ("times=0", not times)) if on]
    url = stats_url + ("?" + "&".join(params) if params else "")
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


class MockWebProcess:
    """`python -m frontier.testing.mockweb` as a child process; `close()` sends SIGTERM.

    The child exits by itself when this process dies. `ports`, `base_urls`, `seed`, `closed_port`,
    `stats_url` come from the JSON line it prints; `stats()` reads its counts over HTTP.
    """

    def __init__(
        self,
        spec: SiteSpec | None = None,
        *,
        ports: Sequence[int] | None = None,
        python: str = sys.executable,
        startup_timeout: float = 60.0,
    ) -> None:
        self.spec = spec if spec is not None else SiteSpec()
        argv = [python, "-m", "frontier.testing.mockweb", *spec_to_argv(self.spec)]
        if ports is not None:
            argv.append("--ports=" + ",".join(str(p) for p in ports))
        self._spawn(argv, startup_timeout)
        self.closed_port: int = self.info["closed_port"]

    def _spawn(self, argv: list[str], startup_timeout: float) -> None:
        """Start the server `argv` (with this checkout first on PYTHONPATH) and read the JSON line it prints."""
        self.proc: subprocess.Popen[str] | None = None
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
        try:
            info = json.loads(self._read_line(startup_timeout))
        except BaseException:
            self.close()
            raise
        self.info: dict[str, Any] = info
        self.ports: list[int] = info["ports"]
        self.base_urls: list[str] = info["base_urls"]
        self.seed: str = info["seed"]
        self.stats_url: str = info["stats_url"]

    def _read_line(self, timeout: float) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"mock web printed no ports within {timeout} s")
                if sel.select(min(left, 0.5)):
                    line = self.proc.stdout.readline()
                    if line:
                        return line
                if self.proc.poll() is not None:
                    raise RuntimeError(f"mock web exited with status {self.proc.returncode} before printing ports")

    def stats(self, *, reset: bool = False, times: bool = True) -> dict[str, Any]:
        return fetch_stats(self.stats_url, reset=reset, times=times)

    def close(self, timeout: float = 5.0) -> int | None:
        """SIGTERM, then SIGKILL after `timeout`; returns the exit status. Idempotent."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        return proc.returncode

    def __enter__(self) -> MockWebProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- command line ---------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    d = SiteSpec()
    p = argparse.ArgumentParser(
        prog="python -m frontier.testing.mockweb",
        description="Serve a synthetic site graph on loopback ports; print one JSON line with the ports.",
    )
    p.add_argument("--pages", type=int, default=d.pages)
    p.add_argument("--hosts", type=int, default=d.hosts)
    p.add_argument("--links-per-page", type=int, default=d.links_per_page)
    p.add_argument("--repeat-share", type=float, default=d.repeat_share)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--disallow", action="append", metavar="PREFIX", help="robots.txt Disallow prefix (repeat)")
    p.add_argument("--no-disallow", action="store_true", help="robots.txt disallows nothing")
    p.add_argument("--crawl-delay", type=float, default=None)
    p.add_argument("--hostile", action=argparse.BooleanOptionalAction, default=d.hostile)
    p.add_argument("--redirects", action=argparse.BooleanOptionalAction, default=d.redirects)
    p.add_argument("--errors", action=argparse.BooleanOptionalAction, default=d.errors)
    p.add_argument("--page-padding", type=int, default=d.page_padding)
    p.add_argument("--out-of-scope-links", action=argparse.BooleanOptionalAction, default=d.out_of_scope_links)
    p.add_argument("--ports", default=None, help="comma-separated fixed ports, one per host (default: free ports)")
    p.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto")
    p.add_argument(
        "--exit-with-parent",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="stop when the parent process dies (default: on)",
    )
    return p


def _spec_from_args(args: argparse.Namespace) -> SiteSpec:
    if args.no_disallow:
        disallow: tuple[str, ...] = ()
    elif args.disallow:
        disallow = tuple(args.disallow)
    else:
        disallow = SiteSpec().robots_disallow
    return SiteSpec(
        pages=args.pages,
        hosts=args.hosts,
        links_per_page=args.links_per_page,
        repeat_share=args.repeat_share,
        seed=args.seed,
        robots_disallow=disallow,
        crawl_delay=args.crawl_delay,
        hostile=args.hostile,
        redirects=args.redirects,
        errors=args.errors,
        page_padding=args.page_padding,
        out_of_scope_links=args.out_of_scope_links,
    )


async def _serve(spec: SiteSpec, ports: list[int] | None, exit_with_parent: bool) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    parent = os.getppid()
    async with MockWeb(spec, ports=ports) as mock:
        info = {
            "ports": mock.ports,
            "base_urls": mock.base_urls,
            "seed": mock.seed,
            "closed_port": mock.closed_port,
            "stats_url": mock.base_urls[0] + STATS_PATH,
            "pid": os.getpid(),
            "spec": dataclasses.asdict(spec),
        }
        sys.stdout.write(json.dumps(info) + "\n")
        sys.stdout.flush()
        while not stop.is_set():
            if exit_with_parent and os.getppid() != parent:
                break
            try:
                async with asyncio.timeout(1.0):
                    await stop.wait()
            except TimeoutError:
                pass


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        spec = _spec_from_args(args)
        ports = [int(p) for p in args.ports.split(",")] if args.ports else None
    except (ConfigError, ValueError) as exc:
        print(f"mockweb: {exc}", file=sys.stderr)
        return 2
    use_uvloop = args.loop == "uvloop" or (args.loop == "auto" and _has_uvloop())
    factory = new_loop if use_uvloop else asyncio.new_event_loop
    try:
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(_serve(spec, ports, args.exit_with_parent))
    except (ConfigError, OSError) as exc:
        print(f"mockweb: {exc}", file=sys.stderr)
        return 1
    return 0


def _has_uvloop() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:  # pragma: no cover
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
