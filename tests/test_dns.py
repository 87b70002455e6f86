"""The worker's DNS (workers.resolver) against real aiohttp servers bound to loopback addresses 127.0.0.2,
127.0.0.3, ...: network.resolve points names at them, each server logs the address a request arrived at and
its Host header, and FetchResult.address says where the fetch connected. No real DNS: the only names looked
up without a network.resolve entry are under .invalid, which the resolver answers itself (RFC 6761)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

from frontier.config import dump_config, load_config
from frontier.crawl.messages import FetchJob, Status
from frontier.errors import ConfigError
from frontier.url.scope import Scope
from workers.fetcher import Fetcher
from workers.resolver import CachingResolver

pytestmark = pytest.mark.timeout(30)

NAMES = {"a.example.org": "127.0.0.2", "b.example.org": "127.0.0.3", "www.example.co.uk": "127.0.0.2",
         "other.co.uk": "127.0.0.3"}
ROBOTS = "User-agent: *\nDisallow: /private\n"


def logging_app(log: list[tuple[str, str, str]]) -> web.Application:
    """A site that logs (address the request arrived at, Host header, path) of every request."""

    async def any_path(request: web.Request) -> web.Response:
        assert request.transport is not None
        log.append((request.transport.get_extra_info("sockname")[0], request.host, request.path))
        if request.path == "/robots.txt":
            return web.Response(text=ROBOTS, content_type="text/plain")
        return web.Response(text="<html><body><a href='/next'>n</a></body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", any_path)
    return app


@pytest.fixture
async def servers(aiohttp_server: Any) -> tuple[int, list[tuple[str, str, str]]]:
    """One server on 127.0.0.2 and one on 127.0.0.3, on the same port, sharing one request log."""
    log: list[tuple[str, str, str]] = []
    first = await aiohttp_server(logging_app(log), host="127.0.0.2")
    await aiohttp_server(logging_app(log), host="127.0.0.3", port=first.port)
    return first.port, log


def cfg_for(port: int, resolve: dict[str, str], **sections: Any) -> Any:
    data: dict[str, Any] = {
        "seeds": [f"http://{name}:{port}/" for name in resolve],
        "workers": {"timeout": 2.0, "connect_timeout": 1.0, "concurrency": 8},
        "network": {"resolve": resolve},
    }
    for name, values in sections.items():
        data.setdefault(name, {}).update(values)
    return load_config(data)


async def test_resolve_sends_each_name_to_its_address_with_its_host_header(servers: Any) -> None:
    port, log = servers
    cfg = cfg_for(port, NAMES)
    async with Fetcher(cfg, Scope.from_config(cfg)) as fetcher:
        pages = [await fetcher.fetch(FetchJob(url=f"http://{name}:{port}/p", depth=1, key=b"k"))
                 for name in NAMES]
        robots = await fetcher.fetch(FetchJob(url=f"http://b.example.org:{port}/robots.txt", depth=0, key=b"r",
                                              robots=True))
    for name, result in zip(NAMES, pages):
        assert (result.status, result.http_status) == (Status.OK, 200), result
        assert result.address == NAMES[name]
        assert result.outlinks == (f"http://{name}:{port}/next",)  # links keep the name
    assert (robots.status, robots.robots_txt, robots.address) == (Status.OK, ROBOTS, "127.0.0.3")
    arrivals = [(address, host) for address, host, _path in log]
    assert arrivals == [(NAMES[name], f"{name}:{port}") for name in NAMES] + [("127.0.0.3", f"b.example.org:{port}")]


async def test_resolve_with_a_port_applies_to_that_port_only(servers: Any) -> None:
    port, log = servers
    cfg = cfg_for(port, {"a.example.org": "127.0.0.2"}, network={"resolve": {f"a.example.org:{port}": "127.0.0.3",
                                                                               "a.example.org": "127.0.0.2"}})
    async with Fetcher(cfg, Scope.from_config(cfg)) as fetcher:
        result = await fetcher.fetch(FetchJob(url=f"http://a.example.org:{port}/", depth=0, key=b"k"))
    assert (result.status, result.address) == (Status.OK, "127.0.0.3")
    assert [address for address, _host, _path in log] == ["127.0.0.3"]


async def test_a_name_under_invalid_is_a_dns_error_without_asking_any_server(servers: Any) -> None:
    port, log = servers
    cfg = cfg_for(port, NAMES, scope={"allowed_domains": ["invalid", "example.org", "example.co.uk", "other.co.uk"]})
    async with Fetcher(cfg, Scope.from_config(cfg)) as fetcher:
        start = asyncio.get_running_loop().time()
        result = await fetcher.fetch(FetchJob(url=f"http://nosuch.invalid:{port}/", depth=0, key=b"k"))
        took = asyncio.get_running_loop().time() - start
    assert (result.status, result.reason, result.address, result.http_status) == (Status.FAIL, "dns_error", None, None)
    assert took < 0.5 and log == []


async def test_a_refused_connection_is_a_connect_error_with_no_address() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.2", 0))
        port = s.getsockname()[1]
    cfg = cfg_for(port, {"a.example.org": "127.0.0.2"})
    async with Fetcher(cfg, Scope.from_config(cfg)) as fetcher:
        result = await fetcher.fetch(FetchJob(url=f"http://a.example.org:{port}/", depth=0, key=b"k"))
    assert (result.status, result.reason, result.address) == (Status.FAIL, "connect_error", None)


@pytest.mark.parametrize(("resolve", "key"), [
    ({"a.example.org": "not-an-ip"}, "network.resolve.a.example.org"),
    ({"a.example.org": "127.0.0.300"}, "network.resolve.a.example.org"),
    ({"a.example.org": 12}, "network.resolve.a.example.org"),
    ({"a.example.org:0": "127.0.0.2"}, "network.resolve.a.example.org:0"),
    ({"a.example.org:http": "127.0.0.2"}, "network.resolve.a.example.org:http"),
    ({"127.0.0.9": "127.0.0.2"}, "network.resolve.127.0.0.9"),
    ({"bad name.org": "127.0.0.2"}, "network.resolve.bad name.org"),
    ({"A.example.org": "127.0.0.2", "a.example.org": "127.0.0.3"}, "network.resolve.a.example.org"),
    (["a.example.org"], "network.resolve"),
])
def test_bad_resolve_entries_name_their_key(resolve: Any, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config({"network": {"resolve": resolve}})
    assert err.value.key == key


def test_resolve_entries_are_kept_normalised() -> None:
    cfg = load_config({"network": {"resolve": {"A.Example.ORG": " 127.0.0.2 ", "b.example.org:8080": "[::1]",
                                               "bücher.example": "127.0.0.3"}}})
    assert cfg.network.resolve == (("a.example.org", "127.0.0.2"), ("b.example.org:8080", "::1"),
                                   ("xn--bcher-kva.example", "127.0.0.3"))


def test_network_and_long_crawl_delay_survive_a_dump_and_load() -> None:
    cfg = load_config({"network": {"resolve": {"a.example.org:8080": "127.0.0.2", "b.example.org": "::1"},
                                   "dns_min_ttl": 10, "dns_max_ttl": 60},
                       "politeness": {"long_crawl_delay": "skip"}})
    data = dump_config(cfg)
    assert data["network"] == {"resolve": {"a.example.org:8080": "127.0.0.2", "b.example.org": "::1"},
                               "dns_min_ttl": 10.0, "dns_max_ttl": 60.0}
    assert load_config(data) == cfg


@pytest.mark.parametrize(("network", "key"), [
    ({"dns_min_ttl": -1}, "network.dns_min_ttl"),
    ({"dns_max_ttl": "long"}, "network.dns_max_ttl"),
    ({"dns_min_ttl": 600, "dns_max_ttl": 60}, "network.dns_max_ttl"),
    ({"ttl": 5}, "network.ttl"),
])
def test_bad_dns_bounds_name_their_key(network: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config({"network": network})
    assert err.value.key == key


# -- the cache, with a counting resolver behind it ------------------------------------------------------


class CountingResolver(AbstractResolver):
    """Answers every name with `address`, after `delay` seconds, counting the queries."""

    def __init__(self, address: str, delay: float = 0.0) -> None:
        self.address = address
        self.delay = delay
        self.queries: list[str] = []

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        self.queries.append(host)
        await asyncio.sleep(self.delay)
        return [ResolveResult(hostname=host, host=self.address, port=port, family=socket.AF_INET, proto=0,
                              flags=socket.AI_NUMERICHOST)]

    async def close(self) -> None:
        pass


async def test_one_query_per_name_while_its_answer_is_fresh() -> None:
    now = [100.0]
    inner = CountingResolver("127.0.0.2", delay=0.05)
    resolver = CachingResolver(inner=inner, min_ttl=60.0, max_ttl=3600.0, clock=lambda: now[0])
    answers = await asyncio.gather(*(resolver.resolve("a.example.org", 80) for _ in range(20)))
    assert all(a[0]["host"] == "127.0.0.2" for a in answers)
    assert inner.queries == ["a.example.org"]  # 20 concurrent fetches, one query
    now[0] += 59.0
    await resolver.resolve("a.example.org", 80)
    assert len(inner.queries) == 1
    now[0] += 2.0  # past dns_min_ttl: the system resolver gives no TTL, so its answers live that long
    await resolver.resolve("a.example.org", 80)
    assert len(inner.queries) == 2
    await resolver.close()


async def test_names_under_invalid_fail_without_a_query() -> None:
    inner = CountingResolver("127.0.0.2")
    resolver = CachingResolver(inner=inner)
    for name in ("nosuch.invalid", "a.b.INVALID.", "invalid"):
        with pytest.raises(socket.gaierror):
            await resolver.resolve(name, 80)
    assert (await resolver.resolve("invalid.example.org", 80))[0]["host"] == "127.0.0.2"  # a label, not the TLD
    assert inner.queries == ["invalid.example.org"]
    await resolver.close()


async def test_a_cancelled_fetch_does_not_cancel_the_query_others_wait_for() -> None:
    inner = CountingResolver("127.0.0.2", delay=0.1)
    resolver = CachingResolver(inner=inner)
    first = asyncio.ensure_future(resolver.resolve("a.example.org", 80))
    second = asyncio.ensure_future(resolver.resolve("a.example.org", 80))
    await asyncio.sleep(0.02)
    first.cancel()
    assert (await second)[0]["host"] == "127.0.0.2"
    assert first.cancelled() and inner.queries == ["a.example.org"]
    await resolver.close()


async def test_the_cache_keeps_at_most_max_names_answers() -> None:
    inner = CountingResolver("127.0.0.2")
    resolver = CachingResolver(inner=inner, max_names=2)
    for name in ("a.example.org", "b.example.org", "c.example.org", "c.example.org", "a.example.org"):
        await resolver.resolve(name, 80)
    assert inner.queries == ["a.example.org", "b.example.org", "c.example.org", "a.example.org"]  # a was dropped
    await resolver.close()


def test_a_records_ttl_is_kept_within_the_bounds() -> None:
    resolver = CachingResolver(min_ttl=60.0, max_ttl=3600.0)
    assert [resolver.ttl(t) for t in (None, 5.0, 600.0, 86400.0)] == [60.0, 60.0, 600.0, 3600.0]


async def test_block_private_drops_private_answers_but_not_the_operators_own() -> None:
    resolver = CachingResolver(inner=CountingResolver("10.1.2.3"), block_private=True,
                               overrides={"mine.example.org": "127.0.0.2"})
    with pytest.raises(OSError, match="private"):
        await resolver.resolve("a.example.org", 80)
    assert (await resolver.resolve("mine.example.org", 80))[0]["host"] == "127.0.0.2"
    await resolver.close()


async def test_one_resolver_serves_every_fetch_of_a_worker(servers: Any) -> None:
    port, _log = servers
    cfg = cfg_for(port, {"a.example.org": "127.0.0.2"})
    async with Fetcher(cfg, Scope.from_config(cfg)) as fetcher:
        assert fetcher._session is not None
        connector = fetcher._session.connector
        assert isinstance(connector, aiohttp.TCPConnector)
        assert isinstance(connector._resolver, CachingResolver) and not connector.use_dns_cache


@pytest.mark.parametrize("value", ["ignore", "", None, 1, "CAP"])
def test_bad_long_crawl_delay_names_its_key(value: Any) -> None:
    with pytest.raises(ConfigError) as err:
        load_config({"politeness": {"long_crawl_delay": value}})
    assert err.value.key == "politeness.long_crawl_delay"


@pytest.mark.parametrize("value", ["cap", "obey", "skip"])
def test_long_crawl_delay_values(value: str) -> None:
    assert load_config({"politeness": {"long_crawl_delay": value}}).politeness.long_crawl_delay == value
