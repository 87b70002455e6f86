"""`python -m frontier.bench revisit`: what a second pass costs with conditional GET, and adaptive vs fixed intervals.

(a) static: a site of --pages static files served by aiohttp's static handler on loopback (it sends ETag and
    Last-Modified and answers 304). A real Frontier (LMDB, revisit.after) and the workers' Fetcher (WARC on) crawl
    it; --changed of the files are rewritten; once they are due, a second pass. Reported: requests per page in each
    pass, 304s among the unchanged, refetched among the changed, body bytes of each pass (headers not counted),
    revisit records in the WARC, bytes per URL of the revisit state (B-tree pages x page size / entries).
(b) poisson: --sim-pages pages change at Poisson rates, log-uniform from hourly to monthly; each is visited on its
    schedule for --days simulated days. Each adaptive schedule (frontier.crawl.revisit: poisson, the default,
    and nutch) runs first, then a fixed interval with the same number of fetches. Reported per schedule: mean
    freshness (share of time each page's copy was current) of each, and the median interval after 10 visits over
    the true change interval.
(c) redis: the revisit state's server memory per fetched URL on Redis / Valkey (--server): --redis-urls URLs
    (about 30 bytes, an 18-byte ETag, a 29-byte Last-Modified) on 100 hosts are queued, leased and acked DONE in a
    crawl with revisits and in one without, on one fresh server; INFO memory's used_memory after minus before the
    acks, the difference of the two crawls over the URLs, and MEMORY USAGE of the keys that hold it (`:rv`
    schedules, `:due` index, `:done` times).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from frontier.config import PolitenessConfig, load_config
from frontier.crawl.messages import FetchJob, FetchResult, Status
from frontier.crawl.revisit import RevisitSchedule
from frontier.crawl.scheduler import Frontier
from frontier.state.crawlstore import DUE_DB, REVISIT_DB
from frontier.url.scope import Scope
from workers.fetcher import Fetcher
from workers.warc import worker_warc_path

HOUR, DAY, MONTH = 3600.0, 86_400.0, 30 * 86_400.0
ADAPTIVE_MODES = ("poisson", "nutch")  # revisit.adaptive schedules simulated, each against its own fixed interval


def write_site(root: Path, pages: int, seed: int) -> list[Path]:
    """An index linking every page, each page linking home and two others; bodies of 2-6 KB of text."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    (root / "index.html").write_text("<html><body>" + "".join(f'<a href="/p{i}.html">p{i}</a> '
                                                              for i in range(pages)) + "</body></html>")
    paths = []
    for i in range(pages):
        words = " ".join(f"w{rng.randrange(10**6)}" for _ in range(rng.randrange(300, 900)))
        path = root / f"p{i}.html"
        path.write_text(f"<html><body><a href='/index.html'>home</a> <a href='/p{(i + 1) % pages}.html'>next</a>"
                        f" <a href='/p{rng.randrange(pages)}.html'>other</a><p>{words}</p></body></html>")
        paths.append(path)
    return paths


async def _pass(frontier: Frontier, fetcher: Fetcher) -> list[FetchResult]:
    results: list[FetchResult] = []
    while not frontier.done:
        jobs = frontier.lease(64)
        if not jobs:
            await asyncio.sleep(0.001)
            continue
        batch = await asyncio.gather(*(fetcher.fetch(job) for job in jobs))
        frontier.report(batch)
        results.extend(batch)
    return results


def _db_bytes(data_dir: Path) -> dict[str, float]:
    """Bytes per entry of the revisit and due databases: B-tree pages x page size / entries."""
    import lmdb

    env = lmdb.open(str(data_dir / "state"), readonly=True, lock=False, max_dbs=64)
    try:
        out = {}
        with env.begin() as txn:
            for name in (REVISIT_DB, DUE_DB):
                stat = txn.stat(env.open_db(name, txn=txn, create=False))
                pages = stat["branch_pages"] + stat["leaf_pages"] + stat["overflow_pages"]
                out[name.decode()] = round(pages * stat["psize"] / max(stat["entries"], 1), 1)
        return out
    finally:
        env.close()


async def static(pages: int, changed_share: float, seed: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="bench-revisit-") as tmp:
        root = Path(tmp) / "site"
        paths = write_site(root, pages, seed)
        requests: Counter[str] = Counter()

        @web.middleware
        async def count(request: web.Request, handler):  # type: ignore[no-untyped-def]
            requests[request.path] += 1
            return await handler(request)

        app = web.Application(middlewares=[count])
        app.router.add_static("/", root)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        base = f"http://127.0.0.1:{port}"
        cfg = load_config({"seeds": [f"{base}/index.html"], "output": {"warc": f"{tmp}/crawl.warc.gz"},
                           "workers": {"timeout": 30.0, "connect_timeout": 10.0}})
        clock = [time.time()]
        frontier = Frontier.open(Path(tmp) / "data", scope=Scope.from_config(cfg), clock=lambda: clock[0],
                            politeness=PolitenessConfig(delay=0, adaptive=False, obey_robots=False, max_per_host=16),
                            revisit=RevisitSchedule(after=DAY, min_after=HOUR))
        out: dict[str, object] = {"pages": pages + 1}
        try:
            async with Fetcher(cfg, Scope.from_config(cfg)) as fetcher:
                frontier.add_seeds([f"{base}/index.html"])
                for n in (1, 2):
                    if n == 2:
                        rng = random.Random(seed + 1)
                        changed = set(rng.sample(range(pages), round(pages * changed_share)))
                        for i in changed:
                            path = paths[i]
                            path.write_text(path.read_text().replace("<p>", "<p>changed ", 1))
                            later = path.stat().st_mtime + 10
                            os.utime(path, (later, later))
                        clock[0] += DAY
                    requests.clear()
                    started = time.perf_counter()
                    results = await _pass(frontier, fetcher)
                    elapsed = time.perf_counter() - started
                    body = sum(r.bytes for r in results)
                    out[f"pass{n}"] = {
                        "results": len(results), "seconds": round(elapsed, 2),
                        "requests_per_page": sorted(Counter(requests.values()).items()),
                        "status": dict(Counter(r.http_status for r in results)),
                        "body_bytes": body,
                    }
                    if n == 2:
                        names = {f"p{i}.html" for i in changed}
                        by_name = {r.job.url.rsplit("/", 1)[1]: r for r in results}
                        unchanged = [r for name, r in by_name.items() if name not in names]
                        out["pass2"].update({  # type: ignore[union-attr]
                            "changed": len(changed),
                            "unchanged_answered_304": f"{sum(r.http_status == 304 for r in unchanged)}/{len(unchanged)}",
                            "changed_refetched_200": f"{sum(by_name[n].http_status == 200 for n in names)}/{len(names)}",
                            "revisit_counts": dict(frontier.revisits),
                        })
            p1, p2 = out["pass1"], out["pass2"]
            out["pass2_body_bytes_vs_pass1"] = round(p2["body_bytes"] / p1["body_bytes"], 3)  # type: ignore[index]
        finally:
            frontier.close()
            await runner.cleanup()
        with open(worker_warc_path(Path(tmp) / "crawl.warc.gz", 0), "rb") as f:
            kinds = Counter(r.rec_type for r in ArchiveIterator(f))
        out["warc_records"] = dict(kinds)
        out["bytes_per_url"] = _db_bytes(Path(tmp) / "data")
        return out


def poisson(pages: int, days: float, seed: int, modes: tuple[str, ...] = ADAPTIVE_MODES) -> dict[str, object]:
    """Adaptive vs fixed at the same number of fetches; freshness is exact for Poisson changes: a copy fetched at
    t is current until the page's next change."""
    rng = random.Random(seed)
    rates = [1 / math.exp(rng.uniform(math.log(HOUR), math.log(MONTH))) for _ in range(pages)]
    horizon = days * DAY
    job = FetchJob("http://sim.example/", 1, b"k")

    def simulate(next_interval) -> tuple[float, int, list[float]]:  # type: ignore[no-untyped-def]
        fresh_total, fetches, ratios = 0.0, 0, []
        for rate in rates:
            changes, t = [], 0.0
            while t < horizon:
                t += rng.expovariate(rate)
                changes.append(t)
            k, t, fresh, previous, visits = 0, 0.0, 0.0, None, 0
            while t < horizon:
                k_before = k
                while changes[k] <= t:
                    k += 1
                changed = k > k_before or previous is None
                fetches += 1
                visits += 1
                previous, interval = next_interval(previous, changed, t)
                fresh += min(changes[k], t + interval, horizon) - t  # current until the next change or visit
                if visits == 10:
                    ratios.append(interval * rate)
                t += interval
            fresh_total += fresh / horizon
        return fresh_total / len(rates), fetches, ratios

    out: dict[str, object] = {"pages": pages, "days": days}
    for adaptive in modes:
        schedule = RevisitSchedule(after=DAY, adaptive=adaptive, min_after=HOUR / 4, max_after=4 * MONTH)

        def visit(previous, changed, now):  # type: ignore[no-untyped-def]
            result = FetchResult(job, Status.OK, http_status=200, digest=(b"%08d" % rng.randrange(10**8)) if changed
                                 else (previous.digest if previous is not None else b"00000000"))
            record, _ = schedule.next(previous, result, now)
            return record, record.interval

        fresh_a, fetches_a, ratios = simulate(visit)
        fixed_interval = horizon * pages / fetches_a
        fresh_f, fetches_f, _ = simulate(lambda previous, changed, now: (True, fixed_interval))
        out[adaptive] = {
            "adaptive": {"freshness": round(fresh_a, 4), "fetches": fetches_a},
            "fixed": {"freshness": round(fresh_f, 4), "fetches": fetches_f, "interval_s": round(fixed_interval)},
            "median_interval_after_10_visits_x_true": round(statistics.median(ratios), 3),
            "within_2x": f"{sum(0.5 <= r <= 2 for r in ratios)}/{len(ratios)}"}
    return out


def _acked_memory(state: object, client: object, urls: list[str], revisit: bool) -> int:
    """used_memory after minus before acking every URL (queued and leased first) DONE, with a schedule each."""
    from frontier.state.base import Ack, Commit, Link, Outcome, Revisit

    now = time.time()
    for start in range(0, len(urls), 10_000):
        state.commit(Commit(links=[Link(url, 1) for url in urls[start:start + 10_000]]), now)  # type: ignore[attr-defined]
    leases = []
    while got := state.lease(10_000, now, lambda host, url: True).leases:  # type: ignore[attr-defined]
        leases.extend(got)
    assert len(leases) == len(urls)
    before = int(client.info("memory")["used_memory"])  # type: ignore[attr-defined]
    for start in range(0, len(leases), 5_000):
        state.commit(Commit(acks=[  # type: ignore[attr-defined]
            Ack(key=lease.key, outcome=Outcome.DONE, fetched=True,
                revisit=Revisit(lease.url, 1, now + DAY, DAY, now, now, b"\x01" * 8, '"64a1b2c3-4d5e6f7"',
                                "Sat, 01 Jan 2000 00:00:00 GMT") if revisit else None)
            for lease in leases[start:start + 5_000]]), now)
    return int(client.info("memory")["used_memory"]) - before  # type: ignore[attr-defined]


def redis_state(urls: int, server: str) -> dict[str, object]:
    from frontier.state.base import StatePolicy
    from frontier.state.redis_state import RedisCrawlState
    from frontier.testing.redis_servers import RedisServer, server_binaries

    binaries = [b for b in server_binaries() if b.product == server]
    if not binaries:
        raise SystemExit(f"no {server} server installed")
    names = [f"http://h{n % 100}.example/p{n:05d}.html" for n in range(urls)]
    out: dict[str, object] = {"server": binaries[0].name, "urls": urls, "url_bytes": round(statistics.mean(map(len, names)), 1)}
    with tempfile.TemporaryDirectory(prefix="bench-revisit-redis-") as tmp, RedisServer(binaries[0], tmp) as node:
        client = node.client()
        used = {}
        for revisit in (False, True):
            policy = StatePolicy(obey_robots=False, max_per_host=10**6, max_suspect_pages=None, revisit=revisit)
            with RedisCrawlState(node.url, policy, crawl=f"r{int(revisit)}") as state:
                used[revisit] = _acked_memory(state, client, names, revisit)
        out["acks_used_memory_bytes"] = {"without": used[False], "with_revisits": used[True]}
        out["revisit_bytes_per_url"] = round((used[True] - used[False]) / urls, 1)
        out["keys_bytes_per_url"] = {
            family: round(sum(client.memory_usage(key, samples=0) or 0
                              for key in client.scan_iter(f"frontier:r1:*:{family}", count=1000)) / urls, 1)
            for family in ("rv", "due", "done")}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m frontier.bench revisit", description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=1000, help="static site pages (plus an index)")
    parser.add_argument("--changed", type=float, default=0.3, help="share of pages rewritten before pass 2")
    parser.add_argument("--sim-pages", type=int, default=2000)
    parser.add_argument("--days", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--redis-urls", type=int, default=50_000)
    parser.add_argument("--server", choices=("valkey", "redis"), default="valkey")
    parser.add_argument("--only", choices=("static", "poisson", "redis"))
    args = parser.parse_args(argv)
    out: dict[str, object] = {}
    if args.only in (None, "static"):
        out["static"] = asyncio.run(static(args.pages, args.changed, args.seed))
    if args.only in (None, "poisson"):
        out["poisson"] = poisson(args.sim_pages, args.days, args.seed)
    if args.only in (None, "redis"):
        out["redis"] = redis_state(args.redis_urls, args.server)
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
