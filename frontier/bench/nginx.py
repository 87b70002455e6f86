"""The crawl benchmark's static site served by nginx instead of aiohttp: the server the issue's wget figure came from.

    with NginxSite(DIR, entry="index.html") as site:   nginx on 127.0.0.1, a generated nginx.conf in a temp dir,
        site.seed, site.base_urls, site.ports, site.stats()   as frontier.bench.site.StaticSiteProcess

The counts come from nginx's access log (one unbuffered line a request: time, status, Content-Type and the
request target exactly as received), so they are keyed and judged as the aiohttp site's are. nginx answers as
a stock server does: keep-alive, sendfile, its own 404s; worker_processes 1, so it shares the machine's two
cores as the aiohttp server does. Its worker runs as the caller (nginx started by root would drop to nobody,
who may not read the directory; started by anyone else it ignores the `user` line).
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from frontier.crawl.child import set_death_signal

__all__ = ["NginxSite", "nginx_path"]

LOOPBACK = "127.0.0.1"
NGINX = "/usr/sbin/nginx"
START_TIMEOUT = 30.0
HTML = "text/html"
# tab-separated; nginx escapes control characters in logged variables, so a target holds no tab
LOG_FORMAT = "$msec\\t$status\\t$sent_http_content_type\\t$request_uri"
CONF = """\
user {user} {group};
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    types {{ text/html html htm; text/css css; application/javascript js; image/png png; image/gif gif;
             image/jpeg jpg jpeg; image/svg+xml svg; application/zip zip; text/plain txt; application/json json; }}
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    log_format counted "{log_format}";
    access_log {tmp}/access.log counted;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen {host}:{port};
        root {root};
        index index.html;
    }}
}}
"""


def nginx_path() -> str | None:
    """The nginx binary, or None (not installed: the benchmark falls back to aiohttp)."""
    found = shutil.which("nginx")
    return found or (NGINX if Path(NGINX).is_file() else None)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


class NginxSite:
    """nginx serving `root` on a free loopback port as a child process (`nginx -c CONF -g 'daemon off;'`),
    stopped by `close()`, or by the kernel's SIGTERM when the process that started it dies (a SIGKILLed
    benchmark); `stats()` reads the access log."""

    def __init__(self, root: Path, *, entry: str = "index.html", startup_timeout: float = START_TIMEOUT) -> None:
        binary = nginx_path()
        if binary is None:
            raise FileNotFoundError("nginx is not installed")
        self.root = root.resolve()
        self._tmp = Path(tempfile.mkdtemp(prefix="frontier-nginx-"))
        self._proc: subprocess.Popen[bytes] | None = None
        port = _free_port()
        conf = self._tmp / "nginx.conf"
        conf.write_text(CONF.format(user=pwd.getpwuid(os.geteuid()).pw_name, group=grp.getgrgid(os.getegid()).gr_name,
                                    tmp=self._tmp, host=LOOPBACK, port=port, root=self.root, log_format=LOG_FORMAT))
        self._proc = subprocess.Popen([binary, "-p", str(self._tmp), "-e", str(self._tmp / "error.log"),
                                       "-c", str(conf), "-g", "daemon off;"], stdin=subprocess.DEVNULL,
                                      preexec_fn=lambda: set_death_signal(signal.SIGTERM))
        try:
            self._wait_listening(port, startup_timeout)
        except BaseException:
            self.close()
            raise
        self.ports = [port]
        self.base_urls = [f"http://{LOOPBACK}:{port}"]
        self.seed = f"{self.base_urls[0]}/{entry.lstrip('/')}"
        self._offset = time.time() - time.monotonic()  # the log's epoch times onto the crawlers' monotonic clock

    def _wait_listening(self, port: int, timeout: float) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                errors = (self._tmp / "error.log").read_text(errors="replace") if (self._tmp / "error.log").exists() else ""
                raise RuntimeError(f"nginx exited with status {self._proc.returncode}: {errors.strip()[-500:]}")
            try:
                socket.create_connection((LOOPBACK, port), timeout=1.0).close()
                return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"nginx did not listen on {LOOPBACK}:{port} within {timeout} s")

    def stats(self, *, times: bool = True) -> dict[str, Any]:
        """As StaticSiteProcess.stats(): counts and last status per URL, request times, HTML pages served 200."""
        counts: Counter[str] = Counter()
        statuses: dict[str, int] = {}
        stamps: list[float] = []
        html = 0
        log = self._tmp / "access.log"
        text = log.read_text(encoding="latin-1") if log.exists() else ""
        for line in text.splitlines():
            fields = line.split("\t", 3)
            if len(fields) != 4:
                continue
            msec, status, content_type, target = fields
            url = self.base_urls[0] + target
            counts[url] += 1
            statuses[url] = int(status)
            stamps.append(float(msec) - self._offset)
            html += status == "200" and content_type.split(";", 1)[0] == HTML
        host = self.base_urls[0].split("://", 1)[1]
        return {"counts": dict(counts), "times": {host: stamps} if times else {}, "statuses": statuses, "html": html}

    def close(self, timeout: float = 5.0) -> int | None:
        """SIGTERM (nginx's fast stop), SIGKILL after `timeout`; removes the temp dir. Idempotent."""
        proc, self._proc = self._proc, None
        code = None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            code = proc.returncode
        shutil.rmtree(self._tmp, ignore_errors=True)
        return code

    def __enter__(self) -> NginxSite:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
