"""`python -m frontier.bench redis-state`: one instance's lease/commit round trips on a RedisCrawlState.

Starts its own server on loopback (`--server`: valkey or redis), queues one page on each of `--hosts`
hosts, then leases 100 pages at a time and commits their acks with 2 new links each until `--pages` pages
are done. Prints pages per second (client and server together on this machine) and the bytes of replies
the server keeps for request ids (`<group>:rq`, `<group>:rqt`: the price of idempotent calls, kept
lease_timeout seconds). What the crawl context (request ids, epoch, pinned policy) costs: run it on two
trees with PYTHONPATH pointing at each.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from frontier.state.base import Ack, Commit, Link, Outcome, StatePolicy
from frontier.state.redis_state import RedisCrawlState
from frontier.testing.redis_servers import RedisServer, server_binaries

BATCH = 100
LINKS_PER_PAGE = 2


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m frontier.bench redis-state")
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--server", choices=("valkey", "redis"), default="valkey")
    args = parser.parse_args(argv)
    binaries = [b for b in server_binaries() if b.product == args.server]
    if not binaries:
        parser.error(f"no {args.server} server installed")
    policy = StatePolicy(lease_timeout=120.0, obey_robots=False, max_per_host=BATCH, max_suspect_pages=None)
    with tempfile.TemporaryDirectory() as d, RedisServer(binaries[0], d) as node, \
            RedisCrawlState(node.url, policy, crawl="bench", groups=8) as state:
        state.commit(Commit(links=[Link(f"http://h{h}.test/0", 0) for h in range(args.hosts)]), time.time())
        t0, done, queued = time.perf_counter(), 0, args.hosts
        while done < args.pages:
            leases = state.lease(BATCH, time.time(), lambda host, url: True).leases
            if not leases:
                break
            links = [Link(f"http://h{n % args.hosts}.test/{n}", 1)
                     for n in range(queued, min(args.pages, queued + LINKS_PER_PAGE * len(leases)))]
            queued += len(links)
            state.commit(Commit(links=links, acks=[Ack(key=lease.key, outcome=Outcome.DONE, fetched=True)
                                                   for lease in leases]), time.time())
            done += len(leases)
        elapsed = time.perf_counter() - t0
        client = node.client()
        kept = sum(client.memory_usage(k) or 0 for k in client.scan_iter("frontier:bench:*:rq*"))
        print(f"{binaries[0].name}: {done} pages in {elapsed:.2f} s = {done / elapsed:.0f} pages/s; "
              f"replies kept for request ids: {kept} bytes")
    return 0
