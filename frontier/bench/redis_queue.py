"""`python -m frontier.bench redis-queue`: server memory per queued URL of a Redis crawl.

For each `--sizes` N, a fresh server on loopback (`--server`: valkey or redis) and a new crawl: N links on
`--hosts` hosts, committed `BATCH` at a time and left queued; INFO memory's used_memory before and after,
over N, and that total split by key family (MEMORY USAGE of every key): the seen-set (`:seen*`: 8-byte
fingerprints in chunks), the host queues (`:q:*`: segments of at most 128 sorted-set entries, one per URL, the
URL without "http://host" in it) and their indexes (`:qi:*`: one member per segment), and the rest (host hashes,
ready set, counters). The seen-set and the queue (segments + indexes) figures are the two the docs state.
URLs look like a crawl's: `http://host-17.example.com/section-3/page-000123.html` (about 55 bytes), or with
`--shape` short, medium or long, the seen bench's URLs (frontier.bench.stream.SHAPES: about 47, 83, 144 bytes,
Zipf-like pages per host on up to 6,000 hosts; `--hosts` then does not apply). A listpack needs every entry
<= `zset-max-listpack-value` bytes (`--listpack-value N` starts the server with it; default 64): a segment
with a longer entry (about 17 bytes + the URL's path) is a skiplist, about 100 B/URL more. The table shows the
share of queue segments, and of queued URLs, in listpacks. `--lease N`: then leases and acks N URLs (1,000 per
call) and prints the rate, to see what a larger listpack value costs the Lua scripts that walk segments.

`--steps`: each step of the queue's layout alone, the same URLs written straight into sorted sets (no crawl, no
seen-set): used_memory per URL and the encoding of the first queue key, for the layout before segments, its
6-byte sequence, its URL without "http://host", segments of the old entries, and segments of compact entries.
"""

from __future__ import annotations

import argparse
import shlex
import tempfile
import time
from pathlib import Path

from frontier.bench.stream import SHAPES, generate, mean_length
from frontier.state.base import Ack, Commit, Link, Outcome, StatePolicy
from frontier.state.redis_state import RedisCrawlState
from frontier.testing.redis_servers import RedisServer, server_binaries

BATCH = 10_000
SEG = 128  # frontier.state.redis_lua: SEG
STEPS = ("old", "6-byte sequence", "and URL without http://host", "segments, old entries", "segments, compact entries")


def _usage(client, pattern: str) -> int:
    return sum(client.memory_usage(key, samples=0) or 0 for key in client.scan_iter(pattern, count=1000))


def urls(size: int, hosts: int, shape: str) -> list[str]:
    """`size` distinct URLs: the default synthetic ones on `hosts` hosts, or the seen bench's of `shape`."""
    if shape == "synthetic":
        return [f"http://host-{n % hosts}.example.com/section-{n % 7}/page-{n:06d}.html" for n in range(size)]
    return generate(size, seed=24, repeat_share=0.0, shape=SHAPES[shape]).distinct_urls


def _listpack_share(client, pattern: str) -> tuple[float, float]:
    """Share of the queue segments that are listpacks, and of the entries in them."""
    keys = list(client.scan_iter(pattern, count=1000))
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.object("encoding", key)
        pipe.zcard(key)
    replies = pipe.execute()
    pairs = list(zip(replies[0::2], replies[1::2]))
    listpack = [card for encoding, card in pairs if encoding == b"listpack"]
    return len(listpack) / max(1, len(pairs)), sum(listpack) / max(1, sum(card for _, card in pairs))


def _lease_rate(state: RedisCrawlState, count: int) -> float:
    """URLs leased and acked (DONE) per second, 1,000 a call, until `count` or the queue is empty."""
    t0, done = time.perf_counter(), 0
    while done < count and (leases := state.lease(min(1000, count - done), time.time(), lambda host, url: True).leases):
        state.commit(Commit(acks=[Ack(key=lease.key, outcome=Outcome.DONE, fetched=True) for lease in leases]),
                     time.time())
        done += len(leases)
    return done / (time.perf_counter() - t0)


def measure(binary, batch: list[str], listpack_value: int, lease: int) -> dict[str, float]:
    size = len(batch)
    policy = StatePolicy(lease_timeout=120.0, obey_robots=False, max_per_host=1000, max_suspect_pages=None)
    with tempfile.TemporaryDirectory() as d, \
            RedisServer(binary, d, config=[f"zset-max-listpack-value {listpack_value}"]) as node, \
            RedisCrawlState(node.url, policy, crawl="bench") as state:
        client = node.client()
        before = int(client.info("memory")["used_memory"])
        t0 = time.perf_counter()
        for start in range(0, size, BATCH):
            state.commit(Commit(links=[Link(url, 0) for url in batch[start:start + BATCH]]), time.time())
        elapsed = time.perf_counter() - t0
        assert state.stats().queued == size
        used = int(client.info("memory")["used_memory"]) - before
        keys, entries = _listpack_share(client, "frontier:bench:*:q:*")
        return {"total": used / size, "seen": _usage(client, "frontier:bench:*:seen*") / size,
                "queues": _usage(client, "frontier:bench:*:q:*") / size,
                "index": _usage(client, "frontier:bench:*:qi:*") / size, "rate": size / elapsed,
                "lp_keys": keys, "lp_urls": entries, "lease": _lease_rate(state, lease) if lease else 0.0}


def _step_entry(step: str, seq: int, host: str, url: str) -> bytes:
    fields = b"1\0" b"0\0" b"0\0" b"0\0" b"\0"  # depth, attempt, redirects, not_before, no payload
    if step in ("old", "segments, old entries"):
        return b"%016dN\0" % seq + fields + url.encode()
    if step == "6-byte sequence":
        return seq.to_bytes(6, "big") + b"N" + fields + url.encode()
    return seq.to_bytes(6, "big") + bytes([64 + 4]) + fields + url[len("http://" + host):].encode()


def measure_step(binary, size: int, hosts: int, step: str) -> tuple[float, str]:
    with tempfile.TemporaryDirectory() as d, RedisServer(binary, d) as node:
        client = node.client()
        before = int(client.info("memory")["used_memory"])
        seqs: dict[str, int] = {}
        pipe = client.pipeline(transaction=False)
        for n in range(size):
            host = f"host-{n % hosts}.example.com"
            seq = seqs[host] = seqs.get(host, 0) + 1
            entry = _step_entry(step, seq, host, f"http://{host}/section-{n % 7}/page-{n:06d}.html")
            if step.startswith("segments"):
                name = b"%013d" % (seq // SEG)
                pipe.zadd(f"q:{host}:".encode() + name, {entry: 0})
                pipe.zadd(f"qi:{host}", {name: 0})
            else:
                pipe.zadd(f"q:{host}", {entry: 0})
            if n % BATCH == BATCH - 1:
                pipe.execute()
        pipe.execute()
        used = int(client.info("memory")["used_memory"]) - before
        return used / size, client.object("encoding", next(client.scan_iter("q:*", count=10))).decode()


def plot_sizes(path: Path, sizes: list[int], figures: list[dict[str, float]], title: str, command: str) -> None:
    """Bytes per queued URL by key family over the queue's size (log scale): the figure of `--plot`."""
    from frontier.bench import plot

    families = {"total": lambda m: m["total"], "queue (segments + index)": lambda m: m["queues"] + m["index"],
                "seen-set": lambda m: m["seen"]}
    plot.lines(path, {name: (sizes, [of(m) for m in figures]) for name, of in families.items()}, title=title,
               xlabel="queued URLs (log scale)", ylabel="server bytes per queued URL", command=command, logx=True)
    print(f"plot: {path}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m frontier.bench redis-queue")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--server", choices=("valkey", "redis"), default="valkey")
    parser.add_argument("--steps", action="store_true", help="each step of the queue's layout alone (see above)")
    parser.add_argument("--shape", choices=("synthetic", *SHAPES), default="synthetic",
                        help="the URLs: synthetic (about 55 bytes, --hosts hosts) or the seen bench's shapes")
    parser.add_argument("--listpack-value", type=int, default=64, help="the server's zset-max-listpack-value")
    parser.add_argument("--lease", type=int, default=0, help="then lease and ack this many URLs: the rate")
    parser.add_argument("--plot", type=Path, default=None, metavar="FILE.svg",
                        help="also draw bytes per queued URL by key family over --sizes (needs matplotlib)")
    args = parser.parse_args(argv)
    binaries = [b for b in server_binaries() if b.product == args.server]
    if not binaries:
        parser.error(f"no {args.server} server installed")
    if args.steps:
        print(f"{binaries[0].name}, {args.hosts} hosts: queue keys only, bytes per URL (used_memory)")
        print("| URLs | layout | queue B/URL | encoding |")
        print("|---|---|---|---|")
        for size in args.sizes:
            for step in STEPS:
                per_url, encoding = measure_step(binaries[0], size, args.hosts, step)
                print(f"| {size:,} | {step} | {per_url:.1f} | {encoding} |", flush=True)
        return 0
    if args.listpack_value < 1:
        parser.error("--listpack-value must be >= 1")
    hosts = f"{args.hosts} hosts" if args.shape == "synthetic" else "Zipf-like hosts"
    print(f"{binaries[0].name}, zset-max-listpack-value {args.listpack_value}, {args.shape} URLs on {hosts}: "
          "bytes per queued URL (used_memory; by key family)")
    print("| queued URLs | mean URL bytes | total B/URL | seen-set B/URL | queue B/URL (segments + index) "
          "| other B/URL | listpack segments (URLs) | URLs/s queued |" + (" URLs/s leased+acked |" if args.lease else ""))
    print("|---|---|---|---|---|---|---|---|" + ("---|" if args.lease else ""))
    figures = []
    for size in args.sizes:
        batch = urls(size, args.hosts, args.shape)
        mean = mean_length(batch)
        m = measure(binaries[0], batch, args.listpack_value, args.lease)
        del batch
        queue = m["queues"] + m["index"]
        print(f"| {size:,} | {mean:.1f} | {m['total']:.1f} | {m['seen']:.1f} "
              f"| {queue:.1f} ({m['queues']:.1f} + {m['index']:.2f}) | {m['total'] - m['seen'] - queue:.1f} "
              f"| {m['lp_keys']:.1%} ({m['lp_urls']:.1%}) | {m['rate']:,.0f} |"
              + (f" {m['lease']:,.0f} |" if args.lease else ""), flush=True)
        figures.append(m)
    if args.plot is not None:
        plot_sizes(args.plot, args.sizes, figures, f"Redis memory per queued URL ({binaries[0].name}, {args.shape} "
                   f"URLs)", shlex.join(["python", "-m", "frontier.bench", "redis-queue", *argv]))
    return 0
