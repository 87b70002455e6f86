"""`python -m frontier.bench ordering`: which scorer fetches the important pages first.

A synthetic web (`OrderingWeb`): `--pages` pages on `--hosts` hosts, host sizes Zipf-distributed, each site a
shallow tree (home -> sections -> pages, every page linking back home), plus preferential-attachment links
(each page links `--extra` pages drawn in proportion to their in-links so far, on any host). PageRank with
damping 0.85 is the truth. Seeds: the home pages of the ten smallest hosts.

Each scorer crawls it through a real `Frontier` (LMDB data dir, politeness with no delay, `--max-per-host` in
flight per host) with a simulated fetcher: a leased page's result carries its outlinks from the graph, no HTTP
(what is compared is the order the frontier leases in, and its own cost per page). The crawl stops at
`limits.max_pages` = 10% of the pages; reported per scorer: the PageRank mass of those pages, the share of the
oracle's, the gap to fifo closed, and pages per second of the frontier loop. The oracle is a simulation that
always fetches the discovered page of highest true PageRank. `--full` also runs each scorer to the end and
checks that every reachable page was fetched exactly once.

Not the mock web over HTTP: the fetch side is the same for every scorer, so it is left out of the comparison.
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

import lmdb
import numpy as np

from frontier.config import DedupConfig, LimitsConfig, PolitenessConfig
from frontier.crawl.messages import FetchResult, Status
from frontier.crawl.ordering import load_scorer
from frontier.crawl.scheduler import Frontier
from frontier.state.crawlstore import QINDEX_DB, QUEUE_DB
from frontier.url.scope import Scope

SCORERS = ("fifo", "inlinks", "opic")
DAMPING = 0.85


class OrderingWeb:
    """The graph: `urls[i]`, `links[i]` (page ids), `host[i]`; `rank` its PageRank (sums to 1)."""

    def __init__(self, pages: int, hosts: int, extra: int, seed: int = 1) -> None:
        rng = random.Random(seed)
        weights = [1.0 / (h + 1) for h in range(hosts)]
        scale = (pages - 3 * hosts) / sum(weights)
        sizes = [3 + int(w * scale) for w in weights]
        sizes[0] += pages - sum(sizes)
        self.urls: list[str] = []
        self.host: list[int] = []
        self.links: list[list[int]] = []
        homes = []
        for h, size in enumerate(sizes):
            base = len(self.urls)
            homes.append(base)
            sections = max(1, round(size ** 0.5))
            for j in range(size):
                self.urls.append(f"http://h{h}.test/" if j == 0 else f"http://h{h}.test/p{j}")
                self.host.append(h)
                if j == 0:
                    self.links.append([base + k for k in range(1, min(size, sections + 1))])
                elif j <= sections:  # a section: its pages, and home
                    self.links.append([base + k for k in range(sections + j, size, sections)] + [base])
                else:
                    self.links.append([base])
        n = len(self.urls)
        pool = list(range(n))  # each page once, plus once per in-link it receives: preferential attachment
        for i in rng.sample(range(n), n):
            targets = {pool[rng.randrange(len(pool))] for _ in range(extra)} - {i}
            self.links[i].extend(t for t in targets if t not in self.links[i])
            pool.extend(targets)
        self.sizes = sizes
        self.seeds = [homes[h] for h in sorted(range(hosts), key=sizes.__getitem__)[:10]]
        self.rank = pagerank(self.links)


def pagerank(links: list[list[int]], iterations: int = 60) -> np.ndarray:
    n = len(links)
    src = np.repeat(np.arange(n), [len(out) for out in links])
    dst = np.fromiter((t for out in links for t in out), dtype=np.int64, count=len(src))
    outdeg = np.array([len(out) for out in links], dtype=np.float64)
    rank = np.full(n, 1.0 / n)
    for _ in range(iterations):
        share = np.where(outdeg > 0, rank / np.maximum(outdeg, 1), 0.0)
        dangling = rank[outdeg == 0].sum()
        rank = (1 - DAMPING) / n + DAMPING * (np.bincount(dst, weights=share[src], minlength=n) + dangling / n)
    return rank / rank.sum()


def oracle(web: OrderingWeb, budget: int) -> list[int]:
    """Always fetch the discovered page of highest true PageRank."""
    seen = set(web.seeds)
    heap = [(-web.rank[p], p) for p in web.seeds]
    heapq.heapify(heap)
    order = []
    while heap and len(order) < budget:
        _, page = heapq.heappop(heap)
        order.append(page)
        for t in web.links[page]:
            if t not in seen:
                seen.add(t)
                heapq.heappush(heap, (-web.rank[t], t))
    return order


def crawl(web: OrderingWeb, scorer: str, where: Path, budget: int | None, max_per_host: int) -> tuple[list[int], float]:
    """The pages in the order the frontier leased them, and the frontier loop's seconds."""
    index = {url: i for i, url in enumerate(web.urls)}
    frontier = Frontier.open(where, scope=Scope(allowed_hosts=[f"h{h}.test" for h in range(len(web.sizes))]),
                        limits=LimitsConfig(max_pages=budget),
                        politeness=PolitenessConfig(delay=0.0, obey_robots=False, max_per_host=max_per_host),
                        dedup=DedupConfig(capacity=2 * len(web.urls)), scorer=load_scorer(scorer))
    order: list[int] = []
    start = time.perf_counter()
    try:
        frontier.add_seeds([web.urls[p] for p in web.seeds])
        while jobs := frontier.lease(64):
            results = []
            for job in jobs:
                page = index[job.url]
                order.append(page)
                results.append(FetchResult(job=job, status=Status.OK, http_status=200, content_type="text/html",
                                           bytes=1000, outlinks=tuple(web.urls[t] for t in web.links[page])))
            frontier.report(results)
        seconds = time.perf_counter() - start
        assert frontier.done
    finally:
        frontier.close()
    return order, seconds


def queue_bytes(where: Path) -> dict[str, float]:
    """Bytes per queued URL of the queue's and the index's B-trees (pages x page size / entries), after a crawl
    stopped by its page budget."""
    env = lmdb.open(str(where / "state"), readonly=True, lock=False, max_dbs=32)
    try:
        out = {}
        with env.begin() as txn:
            for name, db in (("queue", QUEUE_DB), ("qindex", QINDEX_DB)):
                stat = txn.stat(env.open_db(db, txn=txn, create=False))
                pages = stat["branch_pages"] + stat["leaf_pages"] + stat["overflow_pages"]
                out[name] = round(pages * stat["psize"] / max(stat["entries"], 1), 1)
            out["queued"] = txn.stat(env.open_db(QUEUE_DB, txn=txn, create=False))["entries"]
        return out
    finally:
        env.close()


def reachable(web: OrderingWeb) -> set[int]:
    seen, todo = set(web.seeds), list(web.seeds)
    while todo:
        for t in web.links[todo.pop()]:
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m frontier.bench ordering", description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--extra", type=int, default=4, help="preferential-attachment links per page")
    parser.add_argument("--max-per-host", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3, help="runs per scorer, interleaved (the best time counts)")
    parser.add_argument("--full", action="store_true", help="also crawl to the end: missed and fetched twice")
    parser.add_argument("--scorers", default=",".join(SCORERS))
    args = parser.parse_args(argv)
    web = OrderingWeb(args.pages, args.hosts, args.extra)
    budget = len(web.urls) // 10
    best = oracle(web, budget)
    oracle_mass = float(web.rank[best].sum())
    rows = {}
    tmp = Path(tempfile.mkdtemp(prefix="frontier-ordering-"))
    try:
        names = args.scorers.split(",")
        times: dict[str, list[float]] = {name: [] for name in names}
        full_times: dict[str, list[float]] = {name: [] for name in names}
        for r in range(args.repeat):  # interleaved, so that a busy spell of the machine hits every scorer
            for name in names:
                order, seconds = crawl(web, name, tmp / f"{name}-{r}", budget, args.max_per_host)
                times[name].append(seconds)
                if r == 0:
                    mass = float(web.rank[order[:budget]].sum())
                    rows[name] = {"mass": round(mass, 4), "of_oracle": round(mass / oracle_mass, 3),
                                  "fetched": len(order), "bytes_per_queued_url": queue_bytes(tmp / f"{name}-0")}
                if args.full:
                    full, seconds = crawl(web, name, tmp / f"{name}-full-{r}", None, args.max_per_host)
                    full_times[name].append(seconds)
                    if r == 0:
                        counts = Counter(full)
                        rows[name]["missed"] = len(reachable(web) - set(counts))
                        rows[name]["fetched_twice"] = sum(1 for c in counts.values() if c > 1)
                        rows[name]["full_fetched"] = len(full)
        for name in names:
            rows[name]["pages_per_s"] = round(budget / min(times[name]))
            if args.full:
                rows[name]["full_pages_per_s"] = round(rows[name]["full_fetched"] / min(full_times[name]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    fifo = rows.get("fifo", {}).get("mass")
    for name, row in rows.items():
        if fifo is not None and oracle_mass > fifo:
            row["gap_closed"] = round((row["mass"] - fifo) / (oracle_mass - fifo), 3)
        if "fifo" in rows:
            row["speed_vs_fifo"] = round(row["pages_per_s"] / rows["fifo"]["pages_per_s"], 3)
            if "full_pages_per_s" in row:
                row["full_speed_vs_fifo"] = round(row["full_pages_per_s"] / rows["fifo"]["full_pages_per_s"], 3)
    print(json.dumps({"pages": len(web.urls), "hosts": len(web.sizes), "largest_host": max(web.sizes),
                      "smallest_host": min(web.sizes), "budget": budget, "oracle_mass": round(oracle_mass, 4),
                      "scorers": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
