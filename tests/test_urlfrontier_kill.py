"""kill -9 of a real `python -m frontier serve` process mid-stream: every acknowledged PutURLs item and
PutDiscovered batch is there after a restart, and URLs handed out and not acked come back once their
delay_requestable has passed, not before."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc

from frontier.urlfrontier import urlfrontier_pb2 as pb
from frontier.urlfrontier import urlfrontier_pb2_grpc as pb_grpc

ROOT = Path(__file__).resolve().parent.parent
HOLD = 10  # seconds: delay_requestable of the URLs leased before the kill
KILL_AFTER = 3000  # acks of each stream before the kill
STREAM_ITEMS = 1_000_000  # more than any stream sends before the kill: the kill is mid-stream


def start_server(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen([sys.executable, "-m", "frontier", "serve", "--data-dir", str(data_dir), "--grpc",
                                "127.0.0.1:0"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = process.stdout.readline()  # "serving URL Frontier on HOST:PORT (store ...)"
    assert line.startswith("serving URL Frontier on "), f"no banner: {line!r} (exit {process.poll()})"
    return process, line.split()[4]


def items() -> Iterator[pb.URLItem]:
    for i in range(STREAM_ITEMS):
        yield pb.URLItem(ID=str(i), discovered=pb.DiscoveredURLItem(info=pb.URLInfo(url=f"http://p{i % 50}.test/{i}")))


def batches() -> Iterator[pb.DiscoveredBatch]:
    for b in range(STREAM_ITEMS // 50):
        yield pb.DiscoveredBatch(ID=str(b), items=[pb.URLInfo(url=f"http://d{b % 50}.test/{b}/{i}") for i in range(50)])


async def test_kill_9_mid_stream_loses_no_ack_and_leases_come_back(tmp_path: Path) -> None:
    server, address = start_server(tmp_path)
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

    server, address = start_server(tmp_path)
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
