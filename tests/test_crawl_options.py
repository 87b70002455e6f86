"""workers.headers, proxy, cookies and auth against real servers on 127.0.0.1: two "hosts" (two ports: a
host is name:port to the frontier), and a small forwarding HTTP proxy written with aiohttp."""

from __future__ import annotations

import base64
import gzip
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from frontier.config import CrawlConfig, load_config
from frontier.crawl.messages import FetchJob, Status
from frontier.errors import ConfigError
from frontier.url.scope import Scope
from workers.fetcher import Fetcher

pytestmark = pytest.mark.timeout(30)

PASSWORD = "s3cret-pw-8d1"
AUTH_A = "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()


class Site:
    """One host: records each request's headers; /set sets cookies, /private needs alice's basic auth,
    /to-b redirects to the other host, /robots.txt redirects there too (the fetcher follows that itself)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.other = ""  # the other host's base URL

    def app(self) -> web.Application:
        async def handle(request: web.Request) -> web.Response:
            self.requests.append((request.path, dict(request.headers)))
            if request.path == "/set":
                resp = web.Response(text="<html>set</html>", content_type="text/html")
                resp.set_cookie("session", "abc123", path="/")
                resp.set_cookie("wide", "1", path="/", domain="127.0.0.1")
                resp.set_cookie("scoped", "2", path="/only-here")
                return resp
            if request.path == "/private" and request.headers.get("Authorization") != AUTH_A:
                return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="x"'})
            if request.path == "/to-b":
                return web.Response(status=302, headers={"Location": self.other + "/landing"})
            if request.path == "/robots.txt" and self.other:
                return web.Response(status=301, headers={"Location": self.other + "/robots.txt"})
            return web.Response(text="<html><a href=/x>x</a></html>", content_type="text/html")

        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", handle)
        return app

    def headers(self, path: str) -> list[dict[str, str]]:
        return [h for p, h in self.requests if p == path]


@pytest.fixture
async def sites(aiohttp_server: Any) -> AsyncIterator[tuple[Site, Site, int, int]]:
    a, b = Site(), Site()
    server_a = await aiohttp_server(a.app(), host="127.0.0.1")
    server_b = await aiohttp_server(b.app(), host="127.0.0.1")
    a.other = f"http://127.0.0.1:{server_b.port}"
    yield a, b, server_a.port, server_b.port


def cfg_for(port_a: int, port_b: int, tmp: Path | None = None, **workers: Any) -> CrawlConfig:
    data: dict[str, Any] = {
        "seeds": [f"http://127.0.0.1:{port_a}/", f"http://127.0.0.1:{port_b}/"],
        "workers": {"timeout": 5.0, "concurrency": 4, **workers},
    }
    if tmp is not None:
        data["output"] = {"warc": str(tmp / "crawl.warc.gz")}
    return load_config(data)


async def fetch(cfg: CrawlConfig, *urls: str, robots: bool = False) -> list[Any]:
    async with Fetcher(cfg, Scope.from_config(cfg)) as fetcher:
        return [await fetcher.fetch(FetchJob(u, 1, b"k%d" % i, robots=robots)) for i, u in enumerate(urls)]


# -- headers -------------------------------------------------------------------------------------------------


async def test_extra_headers_reach_every_host_and_the_fetcher_keeps_its_own(sites: Any) -> None:
    a, b, pa, pb = sites
    cfg = cfg_for(pa, pb, headers={"Accept-Language": "de-CH", "X-Crawl-Contact": "ops@example.org"})
    results = await fetch(cfg, f"http://127.0.0.1:{pa}/p", f"http://127.0.0.1:{pb}/p")
    assert [r.status for r in results] == [Status.OK, Status.OK]
    for site in (a, b):
        (sent,) = site.headers("/p")
        assert sent["Accept-Language"] == "de-CH" and sent["X-Crawl-Contact"] == "ops@example.org"
        assert sent["User-Agent"] == "frontier/0.1" and sent["Accept"].startswith("text/html")
        assert "Cookie" not in sent and "Authorization" not in sent


@pytest.mark.parametrize("name", ["User-Agent", "accept-encoding", "Cookie", "Authorization", "Host",
                                  "Transfer-Encoding", "Proxy-Authorization"])
def test_headers_the_fetcher_controls_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match=f"workers.headers.{name}: the fetcher sets this header itself"):
        load_config({"seeds": ["http://127.0.0.1:1/"], "workers": {"headers": {name: "x"}}})


# -- proxy ---------------------------------------------------------------------------------------------------


@pytest.fixture
async def proxy(aiohttp_server: Any) -> AsyncIterator[tuple[int, list[tuple[str, str | None]]]]:
    """A forwarding HTTP proxy on loopback: takes absolute-form requests, fetches them, records
    (URL, Proxy-Authorization)."""
    seen: list[tuple[str, str | None]] = []

    async def forward(request: web.Request) -> web.Response:
        seen.append((str(request.url), request.headers.get("Proxy-Authorization")))
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() not in ("host", "proxy-authorization", "proxy-connection", "connection")}
        async with aiohttp.ClientSession(auto_decompress=False) as session, \
                session.get(str(request.url), headers=headers, allow_redirects=False) as upstream:
            body = await upstream.read()
            keep = {k: v for k, v in upstream.headers.items()
                    if k.lower() not in ("transfer-encoding", "content-length", "connection")}
            return web.Response(status=upstream.status, headers=keep, body=body)

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", forward)
    server = await aiohttp_server(app, host="127.0.0.1")
    yield server.port, seen


async def test_requests_go_through_the_configured_proxy(sites: Any, proxy: Any) -> None:
    a, b, pa, pb = sites
    proxy_port, seen = proxy
    cfg = cfg_for(pa, pb, proxy=f"http://crawler:pw-9@127.0.0.1:{proxy_port}", auth={f"127.0.0.1:{pa}": {
        "user": "alice", "password": PASSWORD}})
    results = await fetch(cfg, f"http://127.0.0.1:{pa}/private", f"http://127.0.0.1:{pb}/p")
    assert [r.status for r in results] == [Status.OK, Status.OK]
    credentials = "Basic " + base64.b64encode(b"crawler:pw-9").decode()
    assert seen == [(f"http://127.0.0.1:{pa}/private", credentials), (f"http://127.0.0.1:{pb}/p", credentials)]
    assert a.headers("/private")[0]["Authorization"] == AUTH_A  # host credentials pass through the proxy
    assert "Proxy-Authorization" not in a.headers("/private")[0]  # the proxy's own stay with the proxy


async def test_environment_proxies_are_never_used(sites: Any, proxy: Any, monkeypatch: Any) -> None:
    a, b, pa, pb = sites
    proxy_port, seen = proxy
    for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(var, f"http://127.0.0.1:{proxy_port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    (result,) = await fetch(cfg_for(pa, pb), f"http://127.0.0.1:{pa}/p")
    assert result.status is Status.OK and a.headers("/p") and seen == []


def test_proxy_config_errors_never_repeat_the_url() -> None:
    for bad in ("socks5://u:topsecret@h:1", "http://u:topsecret@h:1/path", "http://u:topsecret@h:99999"):
        with pytest.raises(ConfigError) as err:
            load_config({"seeds": ["http://127.0.0.1:1/"], "workers": {"proxy": bad}})
        assert "topsecret" not in str(err.value) and str(err.value).startswith("workers.proxy:")


# -- cookies -------------------------------------------------------------------------------------------------


async def test_cookies_are_off_by_default(sites: Any) -> None:
    a, b, pa, pb = sites
    await fetch(cfg_for(pa, pb), f"http://127.0.0.1:{pa}/set", f"http://127.0.0.1:{pa}/again")
    assert "Cookie" not in a.headers("/again")[0]


async def test_cookies_are_kept_per_host_and_never_sent_to_another(sites: Any) -> None:
    a, b, pa, pb = sites
    cfg = cfg_for(pa, pb, cookies=True)
    await fetch(cfg, f"http://127.0.0.1:{pa}/set", f"http://127.0.0.1:{pa}/again", f"http://127.0.0.1:{pb}/p",
                f"http://127.0.0.1:{pa}/only-here/x")
    assert a.headers("/again")[0]["Cookie"] == "session=abc123; wide=1"  # not the path-scoped one
    assert a.headers("/only-here/x")[0]["Cookie"] == "session=abc123; wide=1; scoped=2"
    assert "Cookie" not in b.headers("/p")[0]  # same name, other port: another host, even with domain=


# -- basic auth ----------------------------------------------------------------------------------------------


async def test_auth_only_to_its_host_and_not_after_a_redirect_to_another(sites: Any) -> None:
    a, b, pa, pb = sites
    cfg = cfg_for(pa, pb, auth={f"127.0.0.1:{pa}": {"user": "alice", "password": PASSWORD}})
    private, redirect, landing = await fetch(cfg, f"http://127.0.0.1:{pa}/private", f"http://127.0.0.1:{pa}/to-b",
                                             f"http://127.0.0.1:{pb}/landing")
    assert private.status is Status.OK and private.http_status == 200
    assert redirect.redirect_to == f"http://127.0.0.1:{pb}/landing"
    assert a.headers("/to-b")[0]["Authorization"] == AUTH_A
    assert landing.status is Status.OK and "Authorization" not in b.headers("/landing")[0]


async def test_auth_not_sent_on_a_robots_redirect_the_fetcher_follows(sites: Any) -> None:
    a, b, pa, pb = sites
    cfg = cfg_for(pa, pb, auth={f"127.0.0.1:{pa}": {"user": "alice", "password": PASSWORD}})
    (robots,) = await fetch(cfg, f"http://127.0.0.1:{pa}/robots.txt", robots=True)
    assert robots.status is Status.OK
    assert a.headers("/robots.txt")[0]["Authorization"] == AUTH_A
    assert "Authorization" not in b.headers("/robots.txt")[0]


async def test_without_auth_a_protected_page_is_a_401_skip(sites: Any) -> None:
    a, b, pa, pb = sites
    (result,) = await fetch(cfg_for(pa, pb), f"http://127.0.0.1:{pa}/private")
    assert (result.status, result.reason) == (Status.SKIP, "http_401")


async def test_password_from_the_environment_and_never_in_repr_or_warc(sites: Any, tmp_path: Path,
                                                                        monkeypatch: Any) -> None:
    a, b, pa, pb = sites
    monkeypatch.setenv("FRONTIER_TEST_PW", PASSWORD)
    cfg = cfg_for(pa, pb, tmp_path, auth={f"127.0.0.1:{pa}": {"user": "alice", "password_env": "FRONTIER_TEST_PW"}},
                  proxy=None)
    (result,) = await fetch(cfg, f"http://127.0.0.1:{pa}/private")
    assert result.status is Status.OK and a.headers("/private")[0]["Authorization"] == AUTH_A
    inline = cfg_for(pa, pb, auth={f"127.0.0.1:{pa}": {"user": "alice", "password": PASSWORD}})
    assert PASSWORD not in repr(inline) and PASSWORD not in repr(cfg)
    (warc,) = tmp_path.glob("crawl-w*.warc.gz")
    archived = gzip.decompress(warc.read_bytes())
    assert b"/private" in archived and b"Authorization" not in archived
    assert base64.b64encode(f"alice:{PASSWORD}".encode()) not in archived


def test_auth_config_errors() -> None:
    def load(auth: Any) -> CrawlConfig:
        return load_config({"seeds": ["http://127.0.0.1:1/"], "workers": {"auth": auth}})

    with pytest.raises(ConfigError, match="workers.auth.h.password: give password or password_env"):
        load({"h": {"user": "u"}})
    with pytest.raises(ConfigError, match="workers.auth.h.password_env: the environment variable NOPE_X_"):
        load({"h": {"user": "u", "password_env": "NOPE_X_"}})
    with pytest.raises(ConfigError, match="did you mean 'password'"):
        load({"h": {"user": "u", "pasword": "x"}})
    assert dict(load({"Example.COM:80": {"user": "u", "password": "p"}}).workers.auth).keys() == {"example.com"}
