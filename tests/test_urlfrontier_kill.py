"""Real `python -m frontier serve` processes: kill -9 of one mid-stream (LMDB and Redis stores): every
acknowledged PutURLs item and PutDiscovered batch is there after a restart, and URLs handed out and not
acked come back once their delay_requestable has passed, not before; two servers sharing one Redis crawl."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from frontier.testing.redis_servers import server_binaries
from frontier.urlfrontier import urlfrontier_pb2 as pb
from frontier.urlfrontier import urlfrontier_pb2_grpc as pb_grpc

ROOT = Path(__file__).resolve().parent.parent
HOLD = 10  # seconds: delay_requestable of the URLs leased before the kill
KILL_AFTER = 3000  # acks of each stream before the kill
STREAM_ITEMS = 1_000_000  # more than any stream sends before the kill: the kill is mid-stream


BINARIES = server_binaries()


@pytest.fixture(params=["lmdb", "redis"])
def store_args(request: pytest.FixtureRequest, tmp_path: Path, crawl_name: str) -> list[str]:
    """`serve` arguments naming a store: an LMDB data dir, or a crawl.yaml of a Redis server's crawl."""
    if request.param == "lmdb":
        return ["--data-dir", str(tmp_path)]
    if not BINARIES:
        pytest.skip("no Redis or Valkey server installed")
    return ["--config", str(redis_config(tmp_path, request.getfixturevalue("redis_servers").node(BINARIES[0]).url,
                                         crawl_name))]


def redis_config(tmp_path: Path, url: str, crawl: str) -> Path:
    config = tmp_path / "crawl.yaml"
    config.write_text(f"seeds: [http://127.0.0.1:1/]\nstorage:\n  backend: redis\n  data_dir: {tmp_path}\n"
                      f"  redis: {{url: '{url}', crawl: {crawl}}}\n")
    return config


def start_server(store_args: list[str]) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen([sys.executable, "-m", "frontier", "serve", *store_args, "--grpc", "127.0.0.1:0"],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = process.stdout.readline()  # "serving URL Frontier on HOST:PORT (store ...)"
    assert line.startswith("serving URL Frontier on "), f"no banner: {line!r} (exit {process.poll()})"
    return process, line.split()[4]


def items() -> Iterator[pb.URLItem]:
    for i in range(STREAM_ITEMS):
        yield pb.URLItem(ID=str(i), discovered=pb.DiscoveredURLItem(info=pb.URLInfo(url=f"http://p{i % 50}.test/{i}")))


def batches() -> Iterator[pb.DiscoveredBatch]:
    for b in range(STREAM_ITEMS // 50):
        yield pb.DiscoveredBatch(ID=str(b), items=[pb.URLInfo(url=f"http://d{b % 50}.test/{b}/{i}") for i in range(50)])


async def test_kill_9_mid_stream_loses_no_ack_and_leases_come_back(store_args: list[str]) -> None:
    server, address = start_server(store_args)
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = pb_grpc.URLFrontierStub(channel)
            leased_urls = [f"http://lease.test/{i}" for i in range(10)]
            await stub.SetDelay(pb.QueueDelayParams(delay_requestable=0))
            assert [a.status async for a in stub.PutURLs(iter(
                pb.URLItem(discovered=pb.DiscoveredURLItem(info=pb.URLInfo(url=u))) for u in leased_urls))] == [
                pb.AckMessage.OK] * 10

            acked_items: list[str] = []
            acked_batches: list[str] = []
            both = asyncio.Event()

            async def drain(call: object, into: list[str], ok: object) -> None:
                try:
                    async for ack in call:
                        assert ok(ack), ack
                        into.append(ack.ID)
                        if len(acked_items) >= KILL_AFTER and len(acked_batches) >= KILL_AFTER // 50:
                            both.set()
                except grpc.aio.AioRpcError:
                    pass  # the server died

            streams = [asyncio.create_task(drain(stub.PutURLs(items()), acked_items,
                                                     lambda ack: ack.status == pb.AckMessage.OK)),
                       asyncio.create_task(drain(stub.PutDiscovered(batches()), acked_batches,
                                                     lambda ack: list(ack.statuses) == [pb.AckMessage.OK] * 50))]
            await asyncio.wait_for(both.wait(), timeout=120)
            leased_at = time.time()
            got = [u.url async for u in stub.GetURLs(pb.GetParams(key="lease.test", crawlID="",
                                                                  delay_requestable=HOLD))]
            assert got == leased_urls
            server.send_signal(signal.SIGKILL)
            server.wait(timeout=30)
            await asyncio.wait_for(asyncio.gather(*streams), timeout=60)
        assert len(acked_items) < STREAM_ITEMS and len(acked_batches) < STREAM_ITEMS // 50, "the kill was not mid-stream"
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()

    server, address = start_server(store_args)
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = pb_grpc.URLFrontierStub(channel)
            assert time.time() < leased_at + HOLD - 1, "too slow to check the lease before it ends"
            params = pb.GetParams(key="lease.test", crawlID="", delay_requestable=HOLD)
            assert [u.url async for u in stub.GetURLs(params)] == []  # still leased after the restart
            assert (await stub.GetStats(pb.QueueWithinCrawlParams(key="lease.test"))).inProcess == 10
            stored = {item.known.info.url async for item in stub.ListURLs(pb.ListUrlParams(size=2**31))}
            assert {f"http://p{i % 50}.test/{i}" for i in map(int, acked_items)} <= stored
            assert {f"http://d{b % 50}.test/{b}/{i}" for b in map(int, acked_batches) for i in range(50)} <= stored
            await asyncio.sleep(leased_at + HOLD + 0.5 - time.time())
            assert [u.url async for u in stub.GetURLs(params)] == leased_urls  # back after delay_requestable
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0


async def test_two_servers_share_one_redis_crawl(tmp_path: Path, crawl_name: str,
                                                 redis_servers: object) -> None:
    if not BINARIES:
        pytest.skip("no Redis or Valkey server installed")
    config = redis_config(tmp_path, redis_servers.node(BINARIES[0]).url, crawl_name)
    servers = [start_server(["--config", str(config)]) for _ in range(2)]
    try:
        async with grpc.aio.insecure_channel(servers[0][1]) as one, grpc.aio.insecure_channel(servers[1][1]) as two:
            a, b = pb_grpc.URLFrontierStub(one), pb_grpc.URLFrontierStub(two)
            assert sorted((await a.ListNodes(pb.Empty())).values) == sorted(address for _, address in servers)
            assert sorted((await b.ListNodes(pb.Empty())).values) == sorted(address for _, address in servers)
            urls = [f"http://shared.test/{i}" for i in range(6)]
            batch = pb.DiscoveredBatch(ID="x", items=[pb.URLInfo(url=u) for u in urls])
            assert [list(ack.statuses) async for ack in a.PutDiscovered(iter([batch]))] == [[pb.AckMessage.OK] * 6]
            # the seen-set is shared: B knows what A added
            assert [list(ack.statuses) async for ack in b.PutDiscovered(iter([batch]))] == [[pb.AckMessage.SKIPPED] * 6]
            await a.SetDelay(pb.QueueDelayParams(key="shared.test", delay_requestable=3))
            params = pb.GetParams(max_urls_per_queue=3, delay_requestable=60, anyCrawlID=pb.AnyCrawlID())
            first = [u.url async for u in a.GetURLs(params)]
            assert first == urls[:3]
            assert [u.url async for u in b.GetURLs(params)] == []  # the queue's delay holds across servers
            await asyncio.sleep(3.2)
            params.max_urls_per_queue = 6
            second = [u.url async for u in b.GetURLs(params)]
            assert second == urls[3:]  # leases are shared: A's three are not handed out again
            done = [pb.URLItem(known=pb.KnownURLItem(info=pb.URLInfo(url=u), refetchable_from_date=0)) for u in first]
            assert [ack.status async for ack in b.PutURLs(iter(done))] == [pb.AckMessage.OK] * 3  # B acks A's leases
            stats = await a.GetStats(pb.QueueWithinCrawlParams(key="shared.test"))
            assert (stats.size, stats.inProcess, stats.counts["completed"]) == (3, 3, 3)
    finally:
        for process, _ in servers:
            process.send_signal(signal.SIGTERM)
        assert [process.wait(timeout=30) for process, _ in servers] == [0, 0]


async def test_two_servers_on_a_redis_cluster_kill_9_of_one_mid_stream(tmp_path: Path, crawl_name: str,
                                                                      redis_servers: object) -> None:
    """Two `serve` processes on one Redis Cluster (3 masters + 3 replicas): both list both; A takes a PutURLs
    stream while B serves (GetURLs) what A committed; A is SIGKILLed mid-stream; every item A acknowledged is
    in the crawl, B serves each of them once, and B goes on alone."""
    if not BINARIES:
        pytest.skip("no Redis or Valkey server installed")
    cluster = redis_servers.cluster(BINARIES[0])
    config = redis_config(tmp_path, cluster.url, crawl_name)
    (a_server, a_address), (b_server, b_address) = servers = [
        start_server(["--config", str(config), "--delay", "0"]) for _ in range(2)]
    try:
        async with grpc.aio.insecure_channel(a_address) as one, grpc.aio.insecure_channel(b_address) as two:
            a, b = pb_grpc.URLFrontierStub(one), pb_grpc.URLFrontierStub(two)
            for stub in (a, b):
                assert sorted((await stub.ListNodes(pb.Empty())).values) == sorted([a_address, b_address])
            acked: list[str] = []
            served: list[str] = []
            killed = asyncio.Event()

            async def put_on_a() -> None:
                try:
                    async for ack in a.PutURLs(items()):
                        assert ack.status == pb.AckMessage.OK, ack
                        acked.append(ack.ID)
                        if len(acked) >= KILL_AFTER and served and not killed.is_set():
                            a_server.send_signal(signal.SIGKILL)
                            killed.set()
                except grpc.aio.AioRpcError:
                    pass  # A died

            async def get_on_b() -> None:
                params = pb.GetParams(max_urls_per_queue=20, delay_requestable=600, anyCrawlID=pb.AnyCrawlID())
                while not killed.is_set():
                    served.extend([u.url async for u in b.GetURLs(params)])
                    await asyncio.sleep(0.05)

            await asyncio.wait_for(asyncio.gather(put_on_a(), get_on_b()), timeout=180)
            a_server.wait(timeout=30)
            assert len(acked) < STREAM_ITEMS, "the kill was not mid-stream"
            stored = {item.known.info.url async for item in b.ListURLs(pb.ListUrlParams(size=2**31))}
            acked_urls = {f"http://p{i % 50}.test/{i}" for i in map(int, acked)}
            assert acked_urls <= stored  # nothing acknowledged by A is lost
            assert set(served) <= stored and len(served) == len(set(served))
            params = pb.GetParams(max_urls_per_queue=10**6, delay_requestable=600, anyCrawlID=pb.AnyCrawlID())
            rest = [u.url async for u in b.GetURLs(params)]  # B alone serves the rest, each URL once
            assert sorted(served + rest) == sorted(stored)
            assert sorted((await b.ListNodes(pb.Empty())).values) == sorted([a_address, b_address])  # A's beat is fresh
    finally:
        for process, _ in servers:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        assert b_server.wait(timeout=30) == 0
        a_server.wait(timeout=30)
