"""`python -m frontier.bench groups`: the frontier loop's pages/s over a many-host crawl, per politeness.queue_by.

    python -m frontier.bench groups [--hosts 1000] [--pages-per-host 40] [--addresses 100] [--repeat 5]
                                    [--queue-by host,domain,ip]

A synthetic web of `--hosts` hosts ("w<i>.d<i % 250>.test": four names a registered domain), `--pages-per-host`
pages each, every page linking the next two of its host and one page of another host, crawled through a real
`Frontier` (LMDB data dir, no delay, max_per_host 2, robots.txt off) with a simulated fetcher: each leased page's
result carries its links and the address "10.0.x.y" its host is on (`--addresses` of them), so queue_by ip
regroups each host after its first result. What is timed is the frontier's own loop (lease, report), not HTTP:
the part the queue groups change, in CPU time of the process (what other load on a shared machine disturbs
least) and in wall time. Runs of the modes are interleaved, `--repeat` times; the median pages per CPU second and
per wall second of each is printed as JSON, with every run's figures.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from frontier.config import DedupConfig, PolitenessConfig
from frontier.crawl.messages import FetchResult, Status
from frontier.crawl.scheduler import Frontier
from frontier.url.scope import Scope


def crawl(where: Path, hosts: int, per_host: int, addresses: int, queue_by: str) -> tuple[int, float, float]:
    """(pages fetched, CPU seconds, wall seconds of the frontier loop) of one full crawl."""
    def url(h: int, p: int) -> str:
        return f"http://w{h}.d{h % 250}.test/p/{p}"

    frontier = Frontier.open(where, scope=Scope(allowed_domains=["test"]),
                             politeness=PolitenessConfig(delay=0.0, obey_robots=False, max_per_host=2,
                                                         queue_by=queue_by),
                             dedup=DedupConfig(capacity=2 * hosts * per_host))
    fetched = 0
    start, cpu = time.perf_counter(), time.process_time()
    try:
        frontier.add_seeds([url(h, 0) for h in range(hosts)])
        while jobs := frontier.lease(64):
            results = []
            for job in jobs:
                name, _, path = job.url[7:].partition("/")
                h, p = int(name[1:name.index(".")]), int(path.rsplit("/", 1)[1])
                links = tuple(url(h, q) for q in (p + 1, p + 2) if q < per_host) + (url((h * 7 + p) % hosts, p),)
                results.append(FetchResult(job=job, status=Status.OK, http_status=200, content_type="text/html",
                                           bytes=1000, outlinks=links,
                                           address=f"10.0.{h % addresses // 250}.{h % addresses % 250 + 1}"))
            frontier.report(results)
            fetched += len(jobs)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        assert frontier.done
    finally:
        frontier.close()
    return fetched, cpu, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m frontier.bench groups", description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--pages-per-host", type=int, default=40)
    parser.add_argument("--addresses", type=int, default=100, help="server addresses the hosts are on (queue_by ip)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per mode, interleaved (the median counts)")
    parser.add_argument("--queue-by", default="host,domain,ip")
    args = parser.parse_args(argv)
    modes = args.queue_by.split(",")
    rates: dict[str, list[float]] = {mode: [] for mode in modes}
    cpu_rates: dict[str, list[float]] = {mode: [] for mode in modes}
    fetched: dict[str, int] = {}
    tmp = Path(tempfile.mkdtemp(prefix="frontier-groups-"))
    try:
        for r in range(args.repeat):  # interleaved, so that a busy spell of the machine hits every mode
            for mode in modes:
                pages, cpu, seconds = crawl(tmp / f"{mode}-{r}", args.hosts, args.pages_per_host, args.addresses, mode)
                fetched[mode] = pages
                rates[mode].append(round(pages / seconds))
                cpu_rates[mode].append(round(pages / cpu))
                shutil.rmtree(tmp / f"{mode}-{r}", ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps({"hosts": args.hosts, "pages_per_host": args.pages_per_host, "addresses": args.addresses,
                      "modes": {mode: {"fetched": fetched[mode],
                                       "median_pages_per_cpu_s": statistics.median(cpu_rates[mode]),
                                       "median_pages_per_s": statistics.median(rates[mode]),
                                       "cpu_runs": cpu_rates[mode], "runs": rates[mode]} for mode in modes}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
