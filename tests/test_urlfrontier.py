"""The URL Frontier gRPC service (frontier.urlfrontier) driven by a client built from the same .proto, over a
real grpc.aio server on a loopback port and a real LMDB store. The server's clock is driven by the test
(`Clock`), so delays and leases are checked without sleeping. The behaviours of the upstream conformance
suite (crawler-commons/url-frontier tests/.../URLFrontierServiceTest.java) are ported as test_upstream_*."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
import redis

from crawlcmd import PACKAGES, crawl_argv, crawl_env
from frontier.errors import ConfigError, StorageError
from frontier.testing.redis_servers import server_binaries
from frontier.urlfrontier import urlfrontier_pb2 as pb
from frontier.urlfrontier import urlfrontier_pb2_grpc as pb_grpc
from frontier.urlfrontier.cli import Running, Tls, start
from frontier.urlfrontier.redis_store import RedisFrontierStore
from frontier.urlfrontier.security import check_bind
from frontier.urlfrontier.store import FrontierStore

OK, SKIPPED = pb.AckMessage.OK, pb.AckMessage.SKIPPED
ANY = pb.AnyCrawlID()
BINARIES = server_binaries()


class Clock:
    """The server's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = float(int(time.time()))

    def __call__(self) -> float:
        return self.now


class Frontier:
    """A running server, its store (LMDB in `path`, or Redis at `redis_url` under `prefix`) and a client stub."""

    def __init__(self, path: Path, clock: Clock, redis_url: str | None = None, prefix: str = "uf") -> None:
        self.path, self.clock, self.redis_url, self.prefix = path, clock, redis_url, prefix
        self.store: FrontierStore | RedisFrontierStore | None = None
        self.running: Running | None = None
        self.channel: grpc.aio.Channel | None = None

    def open_store(self) -> FrontierStore | RedisFrontierStore:
        if self.redis_url is None:
            return FrontierStore(self.path)
        return RedisFrontierStore(redis.Redis.from_url(self.redis_url), prefix=self.prefix)

    async def open(self) -> pb_grpc.URLFrontierStub:
        self.store = self.open_store()
        self.running = await start(self.store, "127.0.0.1:0", clock=self.clock)
        self.channel = grpc.aio.insecure_channel(self.running.address)
        self.stub = pb_grpc.URLFrontierStub(self.channel)
        return self.stub

    async def close(self) -> None:
        if self.channel is not None:
            await self.channel.close()
        if self.running is not None:
            await self.running.stop()
        if self.store is not None:
            self.store.close()
        self.channel = self.running = self.store = None


@pytest.fixture(params=["lmdb", "redis"])
async def fr(request: pytest.FixtureRequest, tmp_path: Path, crawl_name: str) -> AsyncIterator[Frontier]:
    """A server over each backend: LMDB, and Redis (the first server binary installed, keys of this test's own)."""
    redis_url = None
    if request.param == "redis":
        if not BINARIES:
            pytest.skip("no Redis or Valkey server installed")
        redis_url = request.getfixturevalue("redis_servers").node(BINARIES[0]).url
    frontier = Frontier(tmp_path / "store", Clock(), redis_url, prefix=f"uf:{crawl_name}")
    await frontier.open()
    try:
        yield frontier
    finally:
        await frontier.close()


def info(url: str, key: str = "", crawl: str = "", **metadata: list[str]) -> pb.URLInfo:
    return pb.URLInfo(url=url, key=key, crawlID=crawl,
                      metadata={k: pb.StringList(values=v) for k, v in metadata.items()})


def disc(url: str, key: str = "", crawl: str = "", **metadata: list[str]) -> pb.URLItem:
    return pb.URLItem(discovered=pb.DiscoveredURLItem(info=info(url, key, crawl, **metadata)))


def known(url: str, refetch: float = 0, key: str = "", crawl: str = "") -> pb.URLItem:
    return pb.URLItem(known=pb.KnownURLItem(info=info(url, key, crawl), refetchable_from_date=int(refetch)))


async def put(stub: pb_grpc.URLFrontierStub, *items: pb.URLItem) -> list[int]:
    return [ack.status async for ack in stub.PutURLs(iter(items))]


async def get(stub: pb_grpc.URLFrontierStub, **params: object) -> list[str]:
    if "crawlID" not in params:
        params["anyCrawlID"] = ANY
    return [u.url async for u in stub.GetURLs(pb.GetParams(**params))]


async def stats(stub: pb_grpc.URLFrontierStub, key: str = "", crawl: str = "") -> pb.Stats:
    return await stub.GetStats(pb.QueueWithinCrawlParams(key=key, crawlID=crawl))


# -- the upstream conformance tests, ported --------------------------------------------------------------------


async def test_upstream_never_refetched(fr: Frontier) -> None:
    assert await put(fr.stub, known("http://key1.com/", key="key1.com")) == [OK]
    assert await get(fr.stub, key="key1.com", max_urls_per_queue=1, delay_requestable=2, crawlID="DEFAULT") == []


async def test_upstream_right_order(fr: Frontier) -> None:
    now = fr.clock.now
    assert await put(fr.stub, known("http://key1.com/later", now, key="key1.com"),
                     known("http://key1.com/sooner", now - 10000, key="key1.com")) == [OK, OK]
    urls = await get(fr.stub, key="key1.com", max_urls_per_queue=2, delay_requestable=2, crawlID="DEFAULT")
    assert urls == ["http://key1.com/sooner", "http://key1.com/later"]


async def test_upstream_updates(fr: Frontier) -> None:
    item = disc("http://key1.com/", key="key1.com")
    assert len(await put(fr.stub, item, item)) == 2  # one ack per item, the duplicate included
    assert len((await fr.stub.ListQueues(pb.Pagination())).values) == 1
    assert await get(fr.stub, key="key1.com", max_urls_per_queue=1, delay_requestable=2,
                     crawlID="DEFAULT") == ["http://key1.com/"]
    s = await stats(fr.stub, "key1.com")
    assert (s.numberOfQueues, s.inProcess) == (1, 1)
    fr.clock.now += 1.5  # past the queue's delay (1 s), within the lease
    assert await get(fr.stub, key="key1.com", max_urls_per_queue=1, delay_requestable=2, crawlID="DEFAULT") == []
    fr.clock.now += 0.5  # the lease (delay_requestable 2 s) has passed
    s = await stats(fr.stub, "key1.com")
    assert (s.numberOfQueues, s.inProcess) == (1, 0)
    assert (await fr.stub.DeleteQueue(pb.QueueWithinCrawlParams(key="key1.com"))).value == 1
    assert (await stats(fr.stub, "key1.com")).numberOfQueues == 0


async def test_upstream_queue_names(fr: Frontier) -> None:
    await put(fr.stub, disc("http://gac.icann.org?language_id=9"))
    assert (await stats(fr.stub, "gac.icann.org")).size == 1
    assert (await fr.stub.DeleteQueue(pb.QueueWithinCrawlParams(key="gac.icann.org"))).value == 1


async def test_upstream_crawl_ids(fr: Frontier) -> None:
    assert list((await fr.stub.ListCrawls(pb.Local())).values) == []
    await put(fr.stub, disc("http://urlfrontier.net/", crawl="BESPOKE"))
    await put(fr.stub, disc("http://urlfrontier.net/"))  # implicit default crawl
    await put(fr.stub, disc("http://urlfrontier.net/", crawl="DEFAULT"))  # explicit: the same crawl
    assert sorted((await fr.stub.ListCrawls(pb.Local())).values) == ["BESPOKE", "DEFAULT"]
    for crawl in ("", "BESPOKE"):
        s = await stats(fr.stub, crawl=crawl)
        assert (s.size, s.crawlID, s.numberOfQueues) == (1, crawl or "DEFAULT", 1)
    assert (await fr.stub.DeleteCrawl(pb.DeleteCrawlMessage(value="BESPOKE"))).value == 1
    s = await stats(fr.stub, crawl="BESPOKE")
    assert (s.crawlID, s.size) == ("BESPOKE", 0)
    assert (await stats(fr.stub)).size == 1  # the other crawl is untouched
    await fr.stub.DeleteCrawl(pb.DeleteCrawlMessage())
    assert (await stats(fr.stub)).size == 0
    assert list((await fr.stub.ListCrawls(pb.Local())).values) == []


# -- every RPC -------------------------------------------------------------------------------------------------


async def test_every_rpc(fr: Frontier, caplog: pytest.LogCaptureFixture) -> None:
    s = fr.stub
    assert list((await s.ListNodes(pb.Empty())).values) == [fr.running.address]
    acks = [a async for a in s.PutURLs(iter([pb.URLItem(ID="one", discovered=pb.DiscoveredURLItem(
        info=info("http://a.test/1", src=["x"]))), disc("http://a.test/2")]))]
    assert [(a.ID, a.status) for a in acks] == [("one", OK), ("http://a.test/2", OK)]
    batches = [b async for b in s.PutDiscovered(iter([
        pb.DiscoveredBatch(ID="b1", items=[info("http://b.test/1"), info("http://a.test/1"), info("http://b.test/2")]),
        pb.DiscoveredBatch(ID="b2", items=[info("http://c.test/1", key="custom")])]))]
    assert [(b.ID, list(b.statuses)) for b in batches] == [("b1", [OK, SKIPPED, OK]), ("b2", [OK])]
    queues = await s.ListQueues(pb.Pagination(size=2, start=1))
    assert (list(queues.values), queues.total, queues.start, queues.size) == (["b.test", "custom"], 3, 1, 2)
    st = await stats(s)
    assert (st.size, st.numberOfQueues, st.inProcess, dict(st.counts)) == (
        5, 3, 0, {"completed": 0, "active_queues": 3})
    got = [u async for u in s.GetURLs(pb.GetParams(key="a.test", crawlID="", delay_requestable=60))]
    assert [(u.url, u.key, u.crawlID) for u in got] == [("http://a.test/1", "a.test", "DEFAULT"),
                                                        ("http://a.test/2", "a.test", "DEFAULT")]
    assert list(got[0].metadata["src"].values) == ["x"]  # metadata comes back with the URL
    assert (await stats(s, "a.test")).inProcess == 2
    assert await put(s, known("http://a.test/1", 0)) == [OK]  # done for good
    status = await s.GetURLStatus(pb.URLStatusRequest(url="http://a.test/1"))
    assert (status.known.info.url, status.known.refetchable_from_date) == ("http://a.test/1", 0)
    assert dict((await stats(s, "a.test")).counts)["completed"] == 1
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await s.GetURLStatus(pb.URLStatusRequest(url="http://nowhere.test/"))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    listed = [i.known.info.url async for i in s.ListURLs(pb.ListUrlParams(key="b.test"))]
    assert sorted(listed) == ["http://b.test/1", "http://b.test/2"]
    assert len([i async for i in s.ListURLs(pb.ListUrlParams(size=2, start=1))]) == 2
    assert [i.known.info.url async for i in s.ListURLs(pb.ListUrlParams(filter="C.TEST", ignoreCase=True))] == [
        "http://c.test/1"]
    assert [i async for i in s.ListURLs(pb.ListUrlParams(filter="C.TEST"))] == []
    assert (await s.CountURLs(pb.CountUrlParams())).value == 5
    assert (await s.CountURLs(pb.CountUrlParams(key="a.test"))).value == 2  # queued and done ones
    assert (await s.CountURLs(pb.CountUrlParams(filter="/2"))).value == 2
    await s.SetActive(pb.Active(state=False))
    assert (await s.GetActive(pb.Local())).state is False
    assert await get(s) == []
    await s.SetActive(pb.Active(state=True))
    assert (await s.GetActive(pb.Local())).state is True
    await s.SetDelay(pb.QueueDelayParams(key="b.test", delay_requestable=5))
    await s.BlockQueueUntil(pb.BlockQueueParams(key="custom", time=int(fr.clock.now) + 100))
    await s.SetCrawlLimit(pb.CrawlLimitParams(key="b.test", limit=10))
    assert fr.store.queue_info("DEFAULT", "b.test").delay == 5
    assert fr.store.queue_info("DEFAULT", "b.test").limit == 10
    assert fr.store.queue_info("DEFAULT", "custom").blocked_until == int(fr.clock.now) + 100
    await s.SetLogLevel(pb.LogLevelParams(package="frontier.test_urlfrontier", level=pb.LogLevelParams.ERROR))
    assert logging.getLogger("frontier.test_urlfrontier").level == logging.ERROR
    assert (await s.PurgeURLs(pb.PurgeUrlParams(days=1))).value == 0  # everything is younger
    fr.clock.now += 2 * 86400
    assert (await s.PurgeURLs(pb.PurgeUrlParams(key="b.test", days=1))).value == 2
    assert (await s.DeleteQueue(pb.QueueWithinCrawlParams(key="custom"))).value == 1
    assert (await s.DeleteCrawl(pb.DeleteCrawlMessage(value="DEFAULT"))).value == 1  # a.test/2; a.test/1 is done
    assert (await s.CountURLs(pb.CountUrlParams())).value == 0


# -- semantics -------------------------------------------------------------------------------------------------


async def test_discovered_only_if_unseen_known_replaces(fr: Frontier) -> None:
    now = fr.clock.now
    assert await put(fr.stub, known("http://k.test/a", 0)) == [OK]
    assert await put(fr.stub, disc("http://k.test/a")) == [SKIPPED]  # done: seen, not queued again
    assert await get(fr.stub) == []
    assert await put(fr.stub, known("http://k.test/a", now + 50)) == [OK]  # rescheduled
    assert await get(fr.stub) == []
    fr.clock.now += 50
    assert await get(fr.stub) == ["http://k.test/a"]
    st = await stats(fr.stub)
    assert (st.size, dict(st.counts)["completed"]) == (1, 0)


async def test_lease_expires_unless_acked(fr: Frontier) -> None:
    await put(fr.stub, disc("http://l.test/1"), disc("http://l.test/2"))
    assert await get(fr.stub, delay_requestable=10) == ["http://l.test/1", "http://l.test/2"]
    fr.clock.now += 5
    assert await get(fr.stub, delay_requestable=10) == []  # still leased
    assert await put(fr.stub, known("http://l.test/1", 0)) == [OK]  # acked: done
    fr.clock.now += 5
    assert await get(fr.stub, delay_requestable=10) == ["http://l.test/2"]  # the lease ended: back
    fr.clock.now += 100
    assert await get(fr.stub, delay_requestable=0) == ["http://l.test/2"]  # 0: upstream's default lease, 30 s
    fr.clock.now += 29
    assert await get(fr.stub) == []
    fr.clock.now += 1
    assert await get(fr.stub) == ["http://l.test/2"]


async def test_queue_delay_and_default_delay(fr: Frontier) -> None:
    await put(fr.stub, *(disc(f"http://d.test/{i}") for i in range(3)), disc("http://e.test/1"))
    assert await get(fr.stub, max_urls_per_queue=1) == ["http://d.test/0", "http://e.test/1"]
    fr.clock.now += 0.5
    assert await get(fr.stub, max_urls_per_queue=1) == []  # within the default delay (1 s) of each queue
    await fr.stub.SetDelay(pb.QueueDelayParams(key="d.test", delay_requestable=10))
    fr.clock.now += 0.5
    assert await get(fr.stub, max_urls_per_queue=2) == []  # d.test waits 10 s; e.test has nothing due
    fr.clock.now += 9
    assert await get(fr.stub, max_urls_per_queue=2) == ["http://d.test/1"]  # d.test/0 in flight: room for 1
    await fr.stub.SetDelay(pb.QueueDelayParams(delay_requestable=0))  # the default of every queue
    await put(fr.stub, known("http://e.test/1", 0), disc("http://e.test/2"), disc("http://e.test/3"))
    assert await get(fr.stub, max_urls_per_queue=1) == ["http://e.test/2"]
    assert await get(fr.stub, max_urls_per_queue=2) == ["http://e.test/3"]  # no delay any more for e.test


async def test_max_queues_max_urls_and_turns(fr: Frontier) -> None:
    await fr.stub.SetDelay(pb.QueueDelayParams(delay_requestable=0))
    await put(fr.stub, *(disc(f"http://q{q}.test/{i}") for q in range(3) for i in range(3)))
    first = await get(fr.stub, max_queues=2, max_urls_per_queue=2)
    assert first == ["http://q0.test/0", "http://q0.test/1", "http://q1.test/0", "http://q1.test/1"]
    # q0 and q1 have 2 in flight of max 2: the next call serves q2 first, then the others have room for none
    assert await get(fr.stub, max_queues=2, max_urls_per_queue=2) == ["http://q2.test/0", "http://q2.test/1"]
    assert sorted(await get(fr.stub, max_urls_per_queue=3)) == [
        "http://q0.test/2", "http://q1.test/2", "http://q2.test/2"]


async def test_block_queue_until(fr: Frontier) -> None:
    await put(fr.stub, disc("http://b.test/1"))
    await fr.stub.BlockQueueUntil(pb.BlockQueueParams(key="b.test", time=int(fr.clock.now) + 60))
    assert await get(fr.stub) == []
    assert list((await fr.stub.ListQueues(pb.Pagination())).values) == []  # blocked: inactive
    assert list((await fr.stub.ListQueues(pb.Pagination(include_inactive=True))).values) == ["b.test"]
    fr.clock.now += 60
    assert await get(fr.stub) == ["http://b.test/1"]
    await put(fr.stub, disc("http://b.test/2"))
    await fr.stub.BlockQueueUntil(pb.BlockQueueParams(key="b.test", time=int(fr.clock.now) + 600))
    await fr.stub.BlockQueueUntil(pb.BlockQueueParams(key="b.test", time=0))  # 0 unblocks
    fr.clock.now += 1
    assert await get(fr.stub) == ["http://b.test/2"]
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await fr.stub.BlockQueueUntil(pb.BlockQueueParams(key="nosuch.test", time=1))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


async def test_crawl_limit(fr: Frontier) -> None:
    await fr.stub.SetDelay(pb.QueueDelayParams(delay_requestable=0))
    await put(fr.stub, *(disc(f"http://lim.test/{i}") for i in range(4)))
    await fr.stub.SetCrawlLimit(pb.CrawlLimitParams(key="lim.test", limit=2))
    assert await get(fr.stub, max_urls_per_queue=1) == ["http://lim.test/0"]
    await put(fr.stub, known("http://lim.test/0", 0))
    assert await get(fr.stub, max_urls_per_queue=1) == ["http://lim.test/1"]
    await put(fr.stub, known("http://lim.test/1", 0))
    assert await get(fr.stub) == []  # 2 done: the queue's budget is spent
    assert (await stats(fr.stub, "lim.test")).size == 2
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await fr.stub.SetCrawlLimit(pb.CrawlLimitParams(key="nosuch.test", limit=1))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


async def test_crawls_are_isolated(fr: Frontier) -> None:
    await fr.stub.SetDelay(pb.QueueDelayParams(delay_requestable=0))
    await put(fr.stub, disc("http://same.test/", crawl="one"), disc("http://same.test/", crawl="two"))
    assert await get(fr.stub, crawlID="one") == ["http://same.test/"]
    assert await get(fr.stub, crawlID="one") == []
    assert [(u.url, u.crawlID) async for u in fr.stub.GetURLs(pb.GetParams(crawlID="two"))] == [
        ("http://same.test/", "two")]
    await put(fr.stub, known("http://same.test/", 0, crawl="one"))
    assert (await fr.stub.GetURLStatus(pb.URLStatusRequest(url="http://same.test/", crawlID="two"))
            ).known.refetchable_from_date > 0  # done in crawl one only
    assert await get(fr.stub, key="same.test") == []  # a queue is named within a crawl: none given, none served


async def test_bad_input_is_skipped_not_fatal(fr: Frontier) -> None:
    statuses = await put(fr.stub, disc(""), disc("no-host"), disc("http://x.test/", key="k" * 256),
                         disc("http://x.test/", key="a\0b"), disc("http://x.test/", crawl="c\0"),
                         disc("http://x.test/" + "a" * 9000), pb.URLItem(), known("http://x.test/", 2**64 - 1),
                         pb.URLItem(discovered=pb.DiscoveredURLItem(info=info("http://x.test/")), creation_date=2**64 - 1),
                         disc("http://ok.test/"))
    assert statuses == [SKIPPED] * 9 + [OK]
    await fr.stub.BlockQueueUntil(pb.BlockQueueParams(key="ok.test", time=2**64 - 1))  # clamped to 9999-12-31
    assert await get(fr.stub) == []
    batch = [b async for b in fr.stub.PutDiscovered(iter([pb.DiscoveredBatch(items=[info(""), info("http://ok.test/2")])]))]
    assert list(batch[0].statuses) == [SKIPPED, OK]
    assert (await fr.stub.CountURLs(pb.CountUrlParams())).value == 2


async def test_everything_survives_a_restart(fr: Frontier) -> None:
    await put(fr.stub, disc("http://r.test/1", meta=["m"]), disc("http://r.test/2"), known("http://r.test/3", 0))
    await fr.stub.SetDelay(pb.QueueDelayParams(key="r.test", delay_requestable=0))
    await fr.stub.SetCrawlLimit(pb.CrawlLimitParams(key="r.test", limit=7))
    assert await get(fr.stub, max_urls_per_queue=1, delay_requestable=20) == ["http://r.test/1"]
    await fr.close()
    await fr.open()
    info_ = fr.store.queue_info("DEFAULT", "r.test")
    assert (info_.delay, info_.limit, info_.completed, info_.active) == (0, 7, 1, 2)
    assert (await stats(fr.stub)).inProcess == 1  # the lease survived
    assert await get(fr.stub) == ["http://r.test/2"]
    fr.clock.now += 20
    got = [u async for u in fr.stub.GetURLs(pb.GetParams(anyCrawlID=ANY))]
    assert [(u.url, list(u.metadata["meta"].values)) for u in got] == [("http://r.test/1", ["m"])]
    assert await put(fr.stub, disc("http://r.test/3")) == [SKIPPED]  # the seen-set survived too


# -- security, stubs, CLI --------------------------------------------------------------------------------------


def test_bind_rules() -> None:
    check_bind("127.0.0.1:7071", tls=False, token=None, allow_insecure=False)
    check_bind("[::1]:7071", tls=False, token=None, allow_insecure=False)
    check_bind("localhost:0", tls=False, token=None, allow_insecure=False)
    for address in ("0.0.0.0:7071", "192.0.2.1:7071", "[::]:7071", "example.com:7071"):
        with pytest.raises(ConfigError, match="not a loopback address"):
            check_bind(address, tls=False, token=None, allow_insecure=False)
        with pytest.raises(ConfigError, match="a token"):
            check_bind(address, tls=True, token=None, allow_insecure=False)
        check_bind(address, tls=True, token="t", allow_insecure=False)
        check_bind(address, tls=False, token=None, allow_insecure=True)
    with pytest.raises(ConfigError, match="HOST:PORT"):
        check_bind("7071", tls=False, token=None, allow_insecure=False)


def test_serve_takes_a_crawl_yaml_without_seeds_and_a_crawl_refuses_it(tmp_path: Path) -> None:
    """A service is fed through PutURLs: its crawl.yaml needs no seeds. A crawl of the same file has nothing to
    crawl and says so (exit 2, naming `seeds`)."""
    root = Path(__file__).parent.parent
    config = tmp_path / "crawl.yaml"
    config.write_text(f"storage:\n  data_dir: {tmp_path / 'data'}\n")
    server = subprocess.Popen([sys.executable, "-m", "frontier", "serve", "--config", str(config), "--grpc",
                               "127.0.0.1:0"], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("serving URL Frontier on "), f"{line!r} {server.poll()} {server.stderr.read()}"  # type: ignore[union-attr]
    finally:
        server.terminate()
        server.wait(30)
    done = subprocess.run(crawl_argv(config), env=crawl_env(), capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2 and "seeds: give at least one seed URL" in done.stderr, done.stderr


def test_serve_refuses_a_public_bind_and_a_busy_store(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "frontier", "serve", "--data-dir", str(tmp_path), "--grpc", "0.0.0.0:0"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=Path(__file__).parent.parent)
    assert done.returncode == 2 and "not a loopback address" in done.stderr
    config = tmp_path / "crawl.yaml"
    config.write_text(f"seeds: [http://127.0.0.1:1/]\nstorage:\n  backend: redis\n  data_dir: {tmp_path}\n"
                      "  redis: {url: 'redis://127.0.0.1:1/0'}\n")  # nothing listens on port 1
    done = subprocess.run(cmd[:3] + ["serve", "--config", str(config)], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).parent.parent)
    assert done.returncode == 1 and "127.0.0.1:1" in done.stderr
    with FrontierStore(tmp_path / "urlfrontier"):
        with pytest.raises(StorageError, match="in use"):
            FrontierStore(tmp_path / "urlfrontier")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(d / "key.pem"),
                    "-out", str(d / "cert.pem")], check=True, capture_output=True, timeout=60)
    return Tls(cert=(d / "cert.pem").read_bytes(), key=(d / "key.pem").read_bytes())


async def test_tls_and_token(tmp_path: Path, certificate: Tls) -> None:
    with FrontierStore(tmp_path / "s") as store:
        running = await start(store, "127.0.0.1:0", tls=certificate, token="s3cret")
        try:
            creds = grpc.ssl_channel_credentials(root_certificates=certificate.cert)
            async with grpc.aio.secure_channel(running.address, creds) as channel:
                stub = pb_grpc.URLFrontierStub(channel)
                for call in (stub.GetActive(pb.Local()), stub.GetActive(pb.Local(), metadata=(
                        ("authorization", "Bearer wrong"),))):
                    with pytest.raises(grpc.aio.AioRpcError) as e:
                        await call
                    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
                with pytest.raises(grpc.aio.AioRpcError) as e:  # a streaming call is refused as well
                    [a async for a in stub.PutURLs(iter([disc("http://t.test/")]))]
                assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
                assert store.count("DEFAULT", None, lambda url: True) == 0
                auth = (("authorization", "Bearer s3cret"),)
                assert (await stub.GetActive(pb.Local(), metadata=auth)).state is True
                assert [a.status async for a in stub.PutURLs(iter([disc("http://t.test/")]), metadata=auth)] == [OK]
            async with grpc.aio.insecure_channel(running.address) as plain:  # TLS is required
                with pytest.raises(grpc.aio.AioRpcError):
                    await pb_grpc.URLFrontierStub(plain).GetActive(pb.Local(), metadata=auth, timeout=5)
        finally:
            await running.stop()


def test_regenerating_the_stubs_changes_nothing(tmp_path: Path) -> None:
    proto = "frontier/urlfrontier/urlfrontier.proto"
    (tmp_path / "frontier/urlfrontier").mkdir(parents=True)
    (tmp_path / proto).write_bytes((PACKAGES / proto).read_bytes())
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", ".", "--python_out=.", "--pyi_out=.",
                    "--grpc_python_out=.", proto], cwd=tmp_path, check=True, timeout=60)
    for name in ("urlfrontier_pb2.py", "urlfrontier_pb2.pyi", "urlfrontier_pb2_grpc.py"):
        generated = (tmp_path / "frontier/urlfrontier" / name).read_text()
        assert generated == (PACKAGES / "frontier/urlfrontier" / name).read_text(), f"{name} is stale: regenerate it"


def test_the_proto_matches_the_upstream_api() -> None:
    """The service and messages keep upstream's names and field numbers (v2.6): a spot check of the wire."""
    service = pb.DESCRIPTOR.services_by_name["URLFrontier"]
    assert pb.DESCRIPTOR.package == "urlfrontier"
    assert sorted(service.methods_by_name) == sorted([
        "ListNodes", "ListCrawls", "DeleteCrawl", "ListQueues", "GetURLs", "PutURLs", "PutDiscovered", "GetStats",
        "DeleteQueue", "BlockQueueUntil", "SetActive", "GetActive", "SetDelay", "SetLogLevel", "SetCrawlLimit",
        "GetURLStatus", "ListURLs", "CountURLs", "PurgeURLs"])
    fields = {name: {f.name: f.number for f in pb.DESCRIPTOR.message_types_by_name[name].fields}
              for name in ("URLItem", "URLInfo", "KnownURLItem", "GetParams", "DiscoveredBatch", "BatchAck", "Stats")}
    assert fields["URLItem"] == {"discovered": 1, "known": 2, "ID": 3, "creation_date": 4}
    assert fields["URLInfo"] == {"url": 1, "key": 2, "metadata": 3, "crawlID": 4}
    assert fields["KnownURLItem"] == {"info": 1, "refetchable_from_date": 2}
    assert fields["GetParams"] == {"max_urls_per_queue": 1, "max_queues": 2, "key": 3, "delay_requestable": 4,
                                   "anyCrawlID": 5, "crawlID": 6}
    assert fields["DiscoveredBatch"] == {"ID": 1, "items": 2}
    assert fields["BatchAck"] == {"ID": 1, "statuses": 2}
    assert fields["Stats"] == {"size": 1, "inProcess": 2, "counts": 3, "numberOfQueues": 4, "crawlID": 5}


async def test_the_docs_client_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio
    import re

    doc = (Path(__file__).resolve().parent.parent / "docs/guide/service.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", doc, re.S)
    with FrontierStore(tmp_path / "s") as store:
        running = await start(store, "127.0.0.1:0")
        try:
            await asyncio.to_thread(exec, code.replace("127.0.0.1:7071", running.address), {})
        finally:
            await running.stop()
        assert store.stats("DEFAULT", None, time.time()).completed == 3
    out = capsys.readouterr().out.splitlines()
    assert out == ["[[0, 0, 0]]"] + [f"https://example.com/{i} [0]" for i in range(3)]


async def test_a_client_leaving_mid_stream_does_no_harm(fr: Frontier) -> None:
    async def endless() -> AsyncIterator[pb.URLItem]:
        for i in range(10**6):
            yield disc(f"http://gone.test/{i}")

    call = fr.stub.PutURLs(endless())
    acked = 0
    async for _ in call:
        acked += 1
        if acked == 500:
            call.cancel()
            break
    assert await put(fr.stub, disc("http://after.test/")) == [OK]
    assert (await fr.stub.CountURLs(pb.CountUrlParams(key="gone.test"))).value >= 500  # what was acked is kept


# -- the seen-test and priority ----------------------------------------------------------------------------------


async def test_the_seen_test_is_on_the_canonical_url_and_the_url_comes_back_as_sent(fr: Frontier) -> None:
    sent = "HTTP://Canon.TEST:80/a/./b?x=1#top"
    assert await put(fr.stub, disc(sent)) == [OK]
    # the same URL once canonicalised (case, default port, dot-segment, fragment): seen, not queued again
    assert await put(fr.stub, disc("http://canon.test/a/b?x=1"), disc("http://canon.test:80/a/b?x=1#other")) == [
        SKIPPED, SKIPPED]
    batch = [b async for b in fr.stub.PutDiscovered(iter([pb.DiscoveredBatch(items=[info("http://CANON.test/a/b?x=1")])]))]
    assert list(batch[0].statuses) == [SKIPPED]
    assert await put(fr.stub, disc("http://canon.test/a/b?x=2")) == [OK]  # another URL
    assert await put(fr.stub, disc("http://[bad/")) == [SKIPPED]  # no canonical form: refused, not fatal
    status = await fr.stub.GetURLStatus(pb.URLStatusRequest(url="http://canon.test/a/b?x=1"))
    assert status.known.info.url == sent  # found by its canonical form, stored as sent
    assert await get(fr.stub, max_urls_per_queue=5) == [sent, "http://canon.test/a/b?x=2"]
    assert await put(fr.stub, known("http://canon.test/a/b?x=1", 0)) == [OK]  # a known URL updates the same one
    assert (await fr.stub.CountURLs(pb.CountUrlParams())).value == 2


async def test_priority_metadata_orders_a_queue(fr: Frontier) -> None:
    await fr.stub.SetDelay(pb.QueueDelayParams(delay_requestable=0))
    order = [("low", "-1"), ("none", None), ("high", "10"), ("mid1", "2.5"), ("mid2", "2.5"), ("zero", "0"),
             ("higher", "1e3")]
    items = [disc(f"http://p.test/{name}") if p is None else disc(f"http://p.test/{name}", priority=[p])
             for name, p in order]
    assert await put(fr.stub, *items) == [OK] * len(items)
    assert await put(fr.stub, disc("http://p.test/bad", priority=["x"]), disc("http://p.test/nan", priority=["nan"]),
                     disc("http://p.test/inf", priority=["-inf"])) == [SKIPPED] * 3
    expected = [f"http://p.test/{n}" for n in ("higher", "high", "mid1", "mid2", "none", "zero", "low")]
    assert await get(fr.stub, max_urls_per_queue=2, delay_requestable=10) == expected[:2]
    assert await get(fr.stub, max_urls_per_queue=100, delay_requestable=10) == expected[2:]  # 2 in flight of 100
    fr.clock.now += 10  # every lease ended: all back, in the same order
    got = [u async for u in fr.stub.GetURLs(pb.GetParams(max_urls_per_queue=100, anyCrawlID=ANY, delay_requestable=10))]
    assert [u.url for u in got] == expected
    assert list(got[0].metadata["priority"].values) == ["1e3"]  # the metadata comes back as sent
    # a known URL rescheduled with a new priority takes its new place; a future date waits, whatever its priority
    fr.clock.now += 10
    assert await put(fr.stub, pb.URLItem(known=pb.KnownURLItem(info=info("http://p.test/low", priority=["99"]),
                                                               refetchable_from_date=int(fr.clock.now))),
                     pb.URLItem(known=pb.KnownURLItem(info=info("http://p.test/higher", priority=["1e3"]),
                                                      refetchable_from_date=int(fr.clock.now) + 60))) == [OK, OK]
    assert await get(fr.stub, max_urls_per_queue=2, delay_requestable=10) == ["http://p.test/low", "http://p.test/high"]
    fr.clock.now += 60
    assert (await get(fr.stub, max_urls_per_queue=1, delay_requestable=10)) == ["http://p.test/higher"]


async def test_lmdb_seen_answer_is_frontiers_url_seen(tmp_path: Path) -> None:
    """The LMDB store's "seen" is a URLSeen per crawl (its data dir under crawls/), exact or probabilistic as
    the dedup config says; a deleted queue's URLs are forgotten only where the seen-test can forget."""
    from dataclasses import replace

    from frontier.config import DEFAULT_CANONICAL, DEFAULT_DEDUP
    from frontier.seen.urlseen import URLSeen

    for exact in (True, False):
        dedup = replace(DEFAULT_DEDUP, capacity=10_000, exact=exact)
        path = tmp_path / f"exact-{exact}"
        with FrontierStore(path, dedup=dedup) as store:
            running = await start(store, "127.0.0.1:0")
            try:
                async with grpc.aio.insecure_channel(running.address) as channel:
                    stub = pb_grpc.URLFrontierStub(channel)
                    assert await put(stub, disc("http://s.test/1", crawl="c"), disc("http://t.test/1", crawl="c")) == [
                        OK, OK]
                    assert (await stub.DeleteQueue(pb.QueueWithinCrawlParams(key="t.test", crawlID="c"))).value == 1
                    # exact mode forgets a deleted URL (it may be discovered again); a Bloom filter cannot
                    assert await put(stub, disc("http://t.test/1", crawl="c")) == [OK if exact else SKIPPED]
                    assert await put(stub, known("http://t.test/1", 0, crawl="c")) == [OK]  # a known URL is stored
            finally:
                await running.stop()
        (crawl_dir,) = (path / "crawls").iterdir()
        with URLSeen(crawl_dir, capacity=10_000, exact=exact, rules=DEFAULT_CANONICAL) as seen:
            assert seen.exact is exact
            assert "http://S.TEST:80/1" in seen and "http://t.test/1" in seen and "http://u.test/" not in seen
            assert len(seen) == 2


async def test_redis_seen_answer_is_the_crawl_states_seen_set(tmp_path: Path, redis_servers: object,
                                                              crawl_name: str) -> None:
    """The Redis store's "seen" is the crawl state's seen-set (frontier.state.redis_lua's chunks, asked here with
    the crawl state's own frontier_seen_has); its chunks cannot forget: a deleted queue's URLs stay seen, a
    deleted crawl's seen-set goes with it."""
    from frontier.seen.fingerprint import fingerprint
    from frontier.state.redis_conn import load_library
    from frontier.state.redis_lua import FINGERPRINT_BYTES, FUNCTION_SEEN_HAS

    if not BINARIES:
        pytest.skip("no Redis or Valkey server installed")
    url = redis_servers.node(BINARIES[0]).url
    fr = Frontier(tmp_path, Clock(), url, prefix=f"uf:{crawl_name}")
    await fr.open()
    try:
        assert await put(fr.stub, disc("http://S.test:80/1", crawl="c"), disc("http://t.test/1", crawl="c")) == [OK, OK]
        client = redis.Redis.from_url(url)
        load_library(client, url)
        seen_key = f"uf:{crawl_name}:{{{b'c'.hex()}}}:seen"

        def seen(*urls: str) -> bytes:
            packed = b"".join(sorted(fingerprint(u)[:FINGERPRINT_BYTES] for u in urls))
            return client.fcall(FUNCTION_SEEN_HAS, 1, seen_key, packed)

        assert seen("http://s.test/1") == b"1" and seen("http://u.test/") == b"0"  # canonical form in the seen-set
        assert int(client.hget(seen_key, "n")) == 2
        assert (await fr.stub.DeleteQueue(pb.QueueWithinCrawlParams(key="t.test", crawlID="c"))).value == 1
        assert await put(fr.stub, disc("http://t.test/1", crawl="c")) == [SKIPPED]  # still seen
        assert await put(fr.stub, known("http://t.test/1", 0, crawl="c")) == [OK]  # a known URL is stored again
        assert (await fr.stub.DeleteCrawl(pb.DeleteCrawlMessage(value="c"))).value == 1
        assert client.exists(seen_key) == 0
        assert await put(fr.stub, disc("http://t.test/1", crawl="c")) == [OK]  # a new crawl of the same name
        client.close()
    finally:
        await fr.close()


def test_a_store_of_the_earlier_layout_is_refused_with_one_line(tmp_path: Path) -> None:
    import lmdb

    lmdb.open(str(tmp_path / "urlfrontier"), max_dbs=8).close()  # the earlier layout: one environment in the root
    with pytest.raises(StorageError, match="older layout"):
        FrontierStore(tmp_path / "urlfrontier")
    for name in ("data.mdb", "lock.mdb"):
        (tmp_path / "urlfrontier" / name).unlink()
    with FrontierStore(tmp_path / "urlfrontier"):  # the refusal released the store's lock
        pass
