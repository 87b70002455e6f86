"""What a worker adds to its requests from workers.headers, proxy, cookies and auth (frontier.config).

    opts = RequestOptions.from_config(cfg.workers)      # in the worker process, inside its event loop
    session headers: opts.extra_headers                 # every request, every host
    per request:     opts.headers_for(url, host)        # Authorization / Cookie of that host only, and the
                                                        # proxy's Proxy-Authorization for an http:// URL
                     opts.proxy, opts.proxy_headers     # the proxy (its credentials, for an https CONNECT)
    per response:    opts.response(host, resp)          # its Set-Cookie, kept for that host only

Hosts are "name[:port]" as the frontier spells them (frontier.url.canonical.url_host): credentials and cookies
of one are never sent to another, another port of the same name included. The fetcher follows no redirect
itself (each hop is a new job for the frontier), so a redirect to another host never carries them.

Cookies (workers.cookies) live in memory in each worker process: one aiohttp CookieJar per host (path,
expiry and Secure rules as RFC 6265 says; Domain= cannot widen a cookie past its host), at most
MAX_COOKIE_HOSTS hosts, least recently used dropped first. Several worker processes fetch one host, so the
host sees up to workers.processes separate cookie sessions; a worker restart starts with none. Sharing one
jar would cost a round trip to another process per request, and a site that needs a login session is
better crawled with workers.processes: 1.
"""

from __future__ import annotations

import base64
from collections import OrderedDict
from typing import TYPE_CHECKING

import aiohttp
from yarl import URL

if TYPE_CHECKING:
    from frontier.config import WorkersConfig

__all__ = ["MAX_COOKIE_HOSTS", "SECRET_HEADERS", "RequestOptions", "basic_auth"]

MAX_COOKIE_HOSTS = 10_000
# Request headers that carry credentials: never written to the WARC (nor logged).
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization"})


def basic_auth(user: str, password: str) -> str:
    """An Authorization value for HTTP basic auth (RFC 7617, UTF-8)."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


class RequestOptions:
    """The request options of one worker's session; see the module docstring."""

    def __init__(self, *, headers: dict[str, str] | None = None, proxy: str | None = None, cookies: bool = False,
                 auth: dict[str, tuple[str, str]] | None = None) -> None:
        self.extra_headers = dict(headers or {})
        self.proxy: URL | None = None
        self.proxy_headers: dict[str, str] | None = None
        if proxy is not None:
            url = URL(proxy)
            if url.user is not None:
                self.proxy_headers = {"Proxy-Authorization": basic_auth(url.user, url.password or "")}
            self.proxy = url.with_user(None)
        self._auth = {host: basic_auth(user, password) for host, (user, password) in (auth or {}).items()}
        self._jars: OrderedDict[str, aiohttp.CookieJar] | None = OrderedDict() if cookies else None

    @classmethod
    def from_config(cls, workers: WorkersConfig) -> RequestOptions:
        """Read workers.*; a password_env is read from this process's environment."""
        return cls(headers=dict(workers.headers), proxy=workers.proxy, cookies=workers.cookies,
                   auth={host: (entry.user, entry.secret()) for host, entry in workers.auth})

    @property
    def active(self) -> bool:
        """Whether any request needs per-host headers or any response is looked at."""
        return bool(self._auth) or self._jars is not None or self.proxy_headers is not None

    def headers_for(self, url: URL, host: str) -> dict[str, str]:
        """The Authorization and Cookie headers of a request to `url` on `host` (may be empty)."""
        # aiohttp sends proxy_headers only on the CONNECT of an https:// URL; an http:// request goes to
        # the proxy as it is, so it carries the proxy's credentials itself
        out: dict[str, str] = dict(self.proxy_headers) if self.proxy_headers and url.scheme == "http" else {}
        credentials = self._auth.get(host)
        if credentials is not None:
            out["Authorization"] = credentials
        if self._jars is not None:
            jar = self._jars.get(host)
            if jar is not None:
                self._jars.move_to_end(host)
                cookies = jar.filter_cookies(url)
                if cookies:
                    out["Cookie"] = "; ".join(f"{name}={morsel.coded_value}" for name, morsel in cookies.items())
        return out

    def response(self, host: str, resp: aiohttp.ClientResponse) -> None:
        """Keep the cookies a response from `host` sets (workers.cookies), for that host only."""
        if self._jars is None or not resp.cookies:
            return
        jar = self._jars.get(host)
        if jar is None:
            jar = self._jars[host] = aiohttp.CookieJar(unsafe=True)  # unsafe: IP-address hosts too
            if len(self._jars) > MAX_COOKIE_HOSTS:
                self._jars.popitem(last=False)
        else:
            self._jars.move_to_end(host)
        jar.update_cookies(resp.cookies, resp.url)
