"""The console's HTTP server: aiohttp on a daemon thread of the frontier process, with its own event loop.

    server = ConsoleServer.start(cfg.console, data_dir)   # binds at once (StorageError if it cannot)
    server.publish()              # once the crawl holds its data dir: <data_dir>/console.json (mode 0600)
    server.answer(live, act)      # the frontier loop, once a turn: answers the requests waiting for it
    server.close()                # stops serving, removes console.json

The crawl state (LMDB, a Redis connection, the Bloom filter) belongs to the frontier loop's thread, so a request
never reads it: it leaves (what, params, future) on a queue that the loop answers at its next turn (a turn lasts
at most 0.2 s while idle), as frontier.crawl.metrics does for a scrape, and waits up to ANSWER_TIMEOUT (then 503).
Sorting and paging the hosts table happen here, on the server's thread, over the rows the loop hands over.

Routes (the console contract; every /api/ route needs `Authorization: Bearer TOKEN`, else 401):

    GET  /                       the page (frontier/console/static/index.html); asked from loopback, it carries
                                 the token in <meta name="frontier-token">
    GET  /static/{path}          the page's files (static/, and the vendored chart library in static/vendor/)
    GET  /api/snapshot           counts, rates, seen-test, workers, traps, what the queued URLs wait for, log tail
    GET  /api/hosts|queues|seeds ?sort=KEY&desc=1&q=SUBSTR&offset=0&limit=100 -> {"total", "rows"}
    POST /api/actions/{name}     a JSON object (Content-Type: application/json) -> {"ok": true, "effect": {...}},
                                 400 {"error": "one line"} for bad input; any other method: 405

A request whose Host header names neither a loopback host nor the listen address is refused (403): a web page
whose name an attacker points at 127.0.0.1 (DNS rebinding) cannot read the page or its token. The token is
compared in constant time; it travels in a header, never a cookie, so another site open in the same browser
cannot act (no CSRF).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import queue
import secrets
import socket
import ssl
import threading
from collections.abc import Callable
from concurrent.futures import Future
from importlib import resources
from pathlib import Path
from typing import Any

from frontier.config import ConsoleConfig
from frontier.config.checks import is_loopback, split_address
from frontier.console.reports import MAX_LIMIT, TABLES, ReportError, page_rows, select_rows
from frontier.errors import StorageError

log = logging.getLogger(__name__)

ANSWER_TIMEOUT = 5.0  # seconds a request waits for the frontier loop
CONSOLE_FILE = "console.json"
# a file under static/: names of letters, digits, "_.-" joined by "/", none starting with "." (so no "..")
STATIC_PATH = r"[A-Za-z0-9_-][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_-][A-Za-z0-9_.-]*)*"
SORTED_CACHE = 8  # sorted views of the last rows kept (a page flipping through a sorted, filtered table)


class ActionUnavailable(Exception):
    """No control actions in this frontier process (501)."""


class ConsoleServer:
    """The HTTP side and the hand-over to the frontier loop (see the module docstring)."""

    def __init__(self, sock: socket.socket, *, token: str, tls: ssl.SSLContext | None, listen_host: str,
                 data_dir: Path | None) -> None:
        self.sock = sock
        self.token = token
        self.tls = tls
        self.listen_host = listen_host
        self.data_dir = data_dir
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"{'https' if tls else 'http'}://{shown}:{port}/"
        self._requests: queue.SimpleQueue[tuple[str, dict[str, Any], Future[Any]]] = queue.SimpleQueue()
        self._sorted: dict[tuple[Any, ...], tuple[list[Any], list[tuple[Any, ...]]]] = {}  # view -> (rows, chosen)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = threading.Event()
        self._stopping = asyncio.Event()  # set on the server's loop by `close`
        self._closed = False
        self.thread = threading.Thread(target=self._serve, name="console", daemon=True)

    @classmethod
    def start(cls, cfg: ConsoleConfig, data_dir: Path | None = None) -> "ConsoleServer":
        """Bind cfg.listen (connections wait in its backlog until the first `answer` starts the server's thread: the
        crawl's first jobs go out before aiohttp is imported); StorageError (one line) if the address cannot be
        bound or the TLS files cannot be loaded. `data_dir`: where `publish` writes console.json."""
        host, port = split_address(cfg.listen, "console.listen", ephemeral=True)
        token = cfg.secret() or secrets.token_urlsafe(24)
        tls = None
        if cfg.tls_cert is not None and cfg.tls_key is not None:
            tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            try:
                tls.load_cert_chain(cfg.tls_cert, cfg.tls_key)
            except (OSError, ssl.SSLError) as e:
                raise StorageError(f"console: cannot load {cfg.tls_cert} / {cfg.tls_key}: {e}") from None
        try:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sock = socket.create_server((host, port), family=family, backlog=64)
        except OSError as e:
            raise StorageError(f"console.listen: cannot serve the console on {cfg.listen}: {e.strerror or e}") from None
        return cls(sock, token=token, tls=tls, listen_host=host, data_dir=data_dir)

    # -- console.json ----------------------------------------------------------------------------------------

    def publish(self) -> None:
        """Write data_dir/console.json {"url", "pid", "token"} (`frontier ctl` and `frontier report` read it):
        mode 0600 from its creation (it holds the token), replaced atomically. Called once this process holds
        the data dir, so a second crawl refused on it does not replace the running one's file."""
        if self.data_dir is None:
            return
        path = self.data_dir / CONSOLE_FILE
        tmp = path.with_name(f".{CONSOLE_FILE}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"url": self.url, "pid": os.getpid(), "token": self.token}, f)
        os.replace(tmp, path)

    def _remove_file(self) -> None:
        if self.data_dir is None:
            return
        path = self.data_dir / CONSOLE_FILE
        try:
            if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():  # not a newer process's
                path.unlink()
        except (OSError, ValueError, AttributeError):
            pass

    # -- the frontier loop's side -------------------------------------------------------------------------

    def answer(self, handle: Callable[[str, dict[str, Any]], Any]) -> None:
        """On the frontier loop's thread, once a turn: answer each waiting request with `handle(what, params)`.
        An exception becomes that request's error response; none reaches the crawl."""
        if self.thread.ident is None and not self._closed:
            self.thread.start()
        while True:
            try:
                what, params, future = self._requests.get_nowait()
            except queue.Empty:
                return
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(handle(what, params))
            except Exception as e:  # noqa: BLE001 - a bad request or a bug in a view: an error response
                if not isinstance(e, (ValueError, ActionUnavailable)):
                    log.exception("console: answering %s", what)
                future.set_exception(e)

    # -- the server's thread ---------------------------------------------------------------------------

    def _serve(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._main())
        except Exception:  # noqa: BLE001 - the console fails alone; the crawl goes on
            log.exception("console: the server stopped")
        finally:
            self._started.set()
            loop.close()

    async def _main(self) -> None:
        """Serve until `close` sets _stopping (a stop that waits for no future: it may come at any point)."""
        from aiohttp import web  # on this thread: the crawl's start does not wait for the import

        app = web.Application(middlewares=[self._guard])
        app.router.add_get("/", self._page)
        app.router.add_get(f"/static/{{name:{STATIC_PATH}}}", self._static)
        app.router.add_get("/api/snapshot", self._snapshot)
        for table in TABLES:
            app.router.add_get(f"/api/{table}", self._table)
        app.router.add_post("/api/actions/{name}", self._action)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            await web.SockSite(runner, self.sock, ssl_context=self.tls).start()
            self._started.set()
            if not self._closed:
                await self._stopping.wait()
        finally:
            await runner.cleanup()

    async def _ask(self, what: str, params: dict[str, Any]) -> Any:
        future: Future[Any] = Future()
        self._requests.put((what, params, future))
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), ANSWER_TIMEOUT)
        except asyncio.TimeoutError:
            future.cancel()
            raise TimeoutError(f"the crawl did not answer within {ANSWER_TIMEOUT:g} s (busy, or stopping)") from None

    @staticmethod
    def _json(body: Any, status: int = 200) -> Any:
        from aiohttp import web

        return web.json_response(body, status=status, dumps=lambda v: json.dumps(v, default=str),
                                 headers={"Cache-Control": "no-store"})

    def _host_allowed(self, host_header: str) -> bool:
        host = host_header.rsplit(":", 1)[0] if not host_header.endswith("]") else host_header
        host = host.removeprefix("[").removesuffix("]")
        return is_loopback(host) or host == self.listen_host

    def _authorized(self, request: Any) -> bool:
        sent = request.headers.get("Authorization", "")
        return hmac.compare_digest(sent.encode(), f"Bearer {self.token}".encode())

    async def _guard_impl(self, request: Any, handler: Any) -> Any:
        from aiohttp import web

        if not self._host_allowed(request.host or ""):
            return self._json({"error": f"the Host header {request.host!r} is not this console's"}, 403)
        if request.path.startswith("/api/") and not self._authorized(request):
            return self._json({"error": "missing or wrong token (Authorization: Bearer TOKEN)"}, 401)
        try:
            return await handler(request)
        except web.HTTPException as e:
            if e.status == 405:
                return self._json({"error": f"{request.method} is not allowed here (actions take POST)"}, 405)
            raise
        except (ValueError, ReportError) as e:
            return self._json({"error": str(e).splitlines()[0] if str(e) else type(e).__name__}, 400)
        except ActionUnavailable as e:
            return self._json({"error": str(e)}, 501)
        except TimeoutError as e:
            return self._json({"error": str(e)}, 503)
        except Exception as e:  # noqa: BLE001 - logged on the loop's side; one line for the caller
            return self._json({"error": f"{type(e).__name__}: {e}"}, 500)

    @property
    def _guard(self) -> Any:
        from aiohttp import web

        @web.middleware
        async def guard(request: Any, handler: Any) -> Any:
            return await self._guard_impl(request, handler)

        return guard

    async def _page(self, request: Any) -> Any:
        from aiohttp import web

        try:
            page = resources.files("frontier.console").joinpath("static", "index.html").read_text(encoding="utf-8")
        except OSError:
            return web.Response(status=404, text="the console page is not installed\n")
        if request.remote is not None and is_loopback(request.remote):
            page = page.replace("<head>", f'<head>\n<meta name="frontier-token" content="{self.token}">', 1)
        return web.Response(text=page, content_type="text/html", headers={"Cache-Control": "no-store"})

    async def _static(self, request: Any) -> Any:
        from aiohttp import web

        name = request.match_info["name"]
        try:
            data = resources.files("frontier.console").joinpath("static", *name.split("/")).read_bytes()
        except OSError:
            raise web.HTTPNotFound() from None
        types = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".svg": "image/svg+xml",
                 ".png": "image/png", ".json": "application/json"}
        kind = types.get(os.path.splitext(name)[1], "application/octet-stream")
        return web.Response(body=data, content_type=kind)

    async def _snapshot(self, request: Any) -> Any:
        return self._json(await self._ask("snapshot", {}))

    async def _table(self, request: Any) -> Any:
        table = request.path.rsplit("/", 1)[1]
        query = request.query
        sort = query.get("sort") or None
        desc = query.get("desc", "0").lower() in ("1", "true", "yes")
        try:
            offset, limit = int(query.get("offset", "0")), int(query.get("limit", "100"))
        except ValueError:
            raise ReportError("offset and limit must be integers") from None
        rows = await self._ask(table, {})
        return self._json(self._page_of(table, rows, sort=sort, desc=desc, q=query.get("q", ""), offset=offset,
                                        limit=limit))

    def _page_of(self, table: str, rows: list[tuple[Any, ...]], *, sort: str | None, desc: bool, q: str,
                 offset: int, limit: int) -> dict[str, Any]:
        """page_rows of select_rows, the selection kept while the loop hands over the same rows (it rebuilds them
        at most once a second), so paging through a sorted, filtered table does not sort 10^5 rows each time."""
        keys = TABLES[table]
        if offset < 0 or not 1 <= limit <= MAX_LIMIT:  # before the sort: a bad page costs nothing
            return page_rows([], keys, offset=offset, limit=limit)
        cache_key = (table, sort, desc, q.strip().lower())
        kept = self._sorted.get(cache_key)
        if kept is not None and kept[0] is rows:  # the entry holds `rows`: its id cannot be another list's
            chosen = kept[1]
        else:
            chosen = select_rows(rows, keys, sort=sort, desc=desc, q=q)
            self._sorted.pop(cache_key, None)
            if len(self._sorted) >= SORTED_CACHE:
                self._sorted.pop(next(iter(self._sorted)))
            self._sorted[cache_key] = (rows, chosen)
        return page_rows(chosen, keys, offset=offset, limit=limit)

    async def _action(self, request: Any) -> Any:
        if request.content_type != "application/json":
            raise ValueError(f"send the action as JSON (Content-Type: application/json), not {request.content_type!r}")
        try:
            params = await request.json()
        except ValueError:
            raise ValueError("the body is not valid JSON") from None
        if not isinstance(params, dict):
            raise ValueError(f"the body must be a JSON object, got {type(params).__name__}")
        caller = request.headers.get("X-Frontier-Caller") or f"http {request.remote}"
        effect = await self._ask("action", {"name": request.match_info["name"], "params": params,
                                            "caller": caller[:200]})
        return self._json({"ok": True, "effect": effect})

    def close(self) -> None:
        """Stop serving (idempotent) and remove console.json."""
        if self._closed:
            return
        self._closed = True
        if self.thread.ident is not None:  # started: wait until it serves (or failed), then stop its loop
            self._started.wait(5.0)
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._stopping.set)
            except RuntimeError:  # its loop is closed already: the thread has ended
                pass
        if self.thread.ident is not None:
            self.thread.join(5.0)
        self.sock.close()
        self._remove_file()
