"""`frontier report hosts|queues|seeds`: the console's tables of a crawl's data dir, running or finished.

    frontier report hosts DATA_DIR [--json | --csv] [--sort KEY [--desc]] [--q SUBSTR] [--log crawl.jsonl]
    frontier report queues|seeds --config crawl.yaml ...

The rows are those of the console's page (frontier.console.reports builds both): hosts (pages fetched, bytes,
robots.txt refusals, queued, 304s, errors), queues (queued URLs per host: normal, low (suspected traps), waiting
a retry's backoff, the host's pages fetched) and seeds (each seed's last attempt, from the crawl log; a seed still
queued and never tried: "queued"). The data dir is read as `status` reads it (frontier.cli.crawlinfo: a
read-only LMDB open that a running crawl does not notice), the crawl log as a file. A stored data dir does not
hold the live politeness clock: the host state is "queued" or "done", a host's delay unknown (empty); a running
crawl's live view is its console's (GET /api/hosts). A crawl with storage.backend: redis (`--config`): its hosts'
queued and fetched counts from the server (reads only), the log figures from this instance's crawl log; its
queued seeds are not listed (the server keeps no index of them).

Output: a table of aligned columns (the first 50 rows unless --limit), or all rows as --json or --csv. Exit
status 0; 2 for bad arguments or a directory that is not a crawl's data dir.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from frontier.cli.ops import _config, _locate, _where, _write
from frontier.console.reports import (TABLES, HostFacts, LogTally, ReportError, host_rows, queue_rows,
                                      seed_rows, select_rows, to_csv, to_json)
from frontier.errors import FrontierError

REPORT_HELP = "print a crawl's hosts, queues or seeds table (the console's), running or finished, as text, JSON or CSV"
TEXT_ROWS = 50  # rows of the text table unless --limit


def report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("table", choices=tuple(TABLES), help="which table")
    _where(parser)
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="every row, as a JSON array of objects")
    form.add_argument("--csv", action="store_true", help="every row, as CSV with a header line")
    parser.add_argument("--sort", help="a column to sort by (hosts: fetched, bytes, queued, errors, ...)")
    parser.add_argument("--desc", action="store_true", help="largest first")
    parser.add_argument("--q", default="", help="only rows whose first column (host, URL) holds this text")
    parser.add_argument("--limit", type=int, default=TEXT_ROWS, help=f"rows of the text table (default {TEXT_ROWS})")
    parser.add_argument("--log", type=Path, help="the crawl log (default: output.log of --config, else "
                                                 "DATA_DIR/crawl.jsonl)")


def stored_facts(data_dir: Path, now: float) -> tuple[list[HostFacts], list[str]]:
    """HostFacts of every host a data dir's LMDB state knows, and its queued seeds (depth 0), read as `status`
    reads (see frontier.cli.crawlinfo)."""
    from frontier.cli.crawlinfo import ReadOnlyEnv, _chunks, env_dir
    from frontier.state.crawlstore import HOSTS_DB, QUEUE_DB, decode_entry, decode_host, host_of_key, is_low

    queued: Counter[int] = Counter()
    low: Counter[int] = Counter()
    backoff: Counter[int] = Counter()
    seeds: list[str] = []
    with ReadOnlyEnv(env_dir(data_dir)) as env:
        hosts_db, queue_db = env.db(HOSTS_DB), env.db(QUEUE_DB)
        with env.begin() as txn:
            names = {} if hosts_db is None else {host_of_key(k): decode_host(v) for k, v in txn.cursor(db=hosts_db)}
        if queue_db is not None:
            for pairs in _chunks(env, queue_db, values=True):
                for key, value in pairs:
                    hid = host_of_key(key)
                    queued[hid] += 1
                    if is_low(key):
                        low[hid] += 1
                    entry = decode_entry(key, value)
                    if entry.not_before > now:
                        backoff[hid] += 1
                    if entry.depth == 0:
                        seeds.append(entry.url)
    facts = [HostFacts(host=name, fetched=fetched, queued=queued[hid], low=low[hid], retrying=backoff[hid],
                       state="queued" if queued[hid] else "done")
             for hid, (name, fetched) in names.items()]
    return facts, seeds


def redis_facts(cfg: Any) -> list[HostFacts]:
    """HostFacts of every host of a Redis crawl, read from the server (frontier.state.redis_info)."""
    from frontier.state.redis_info import CrawlKeys

    redis = cfg.storage.redis
    with CrawlKeys.open(redis.url, crawl=redis.crawl, cluster=redis.cluster,
                        allow_unauthenticated=redis.allow_unauthenticated,
                        allow_plaintext=redis.allow_plaintext) as crawl:
        return [HostFacts(host=host, fetched=fetched, queued=queued, state="queued" if queued else "done")
                for host, queued, fetched in crawl.hosts()]


def report_rows(table: str, facts: list[HostFacts], seeds: list[str], log_path: Path) -> list[tuple[Any, ...]]:
    """The rows of `table` from the hosts' facts, the queued seeds and a crawl log (missing: no log figures)."""
    tally = LogTally()
    try:
        with open(log_path, "rb") as f:
            tally.read(f)
    except FileNotFoundError:
        pass
    if table == "hosts":
        return host_rows(facts, tally)
    if table == "queues":
        return queue_rows(facts)
    return seed_rows(tally, seeds)


def _text(rows: list[tuple[Any, ...]], keys: tuple[str, ...], total: int) -> list[str]:
    cells = [list(keys)] + [["" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v) for v in row]
                            for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(keys))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))).rstrip()
             for line in cells]
    if total > len(rows):
        lines.append(f"... {total - len(rows):,} more of {total:,} (--limit, --json or --csv for all)")
    return lines


def report(args: argparse.Namespace) -> int:
    cfg = _config(args)
    keys = TABLES[args.table]
    try:
        if cfg is not None and cfg.storage.backend == "redis":
            facts, seeds, log_path = redis_facts(cfg), [], cfg.log_path
        else:
            data_dir, log_path = _locate(args, cfg)
            facts, seeds = stored_facts(data_dir, time.time())
        rows = report_rows(args.table, facts, seeds, args.log or log_path)
        rows = select_rows(rows, keys, sort=args.sort, desc=args.desc, q=args.q)
    except (FrontierError, ReportError) as e:
        args.parser.error(str(e))
    if args.json:
        return _write([to_json(rows, keys)], sys.stdout)
    if args.csv:
        sys.stdout.write(to_csv(rows, keys))
        return 0
    return _write(_text(rows[:max(0, args.limit)], keys, len(rows)), sys.stdout)
