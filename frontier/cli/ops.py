"""`python -m frontier status|export`: an operator's view of a crawl's data dir, running or stopped.

    python -m frontier status DATA_DIR [--json] [--top 10] [--runs 5]
    python -m frontier status --config crawl.yaml         (storage.backend: redis: the crawl's state on the server)
    python -m frontier export DATA_DIR --what fetched|failed|skipped|queued|suspected|due [--output FILE] [--log ...]

Both read without taking the data dir (frontier.cli.crawlinfo: a read-only LMDB open, no lock a crawl would
trip on), so they work while run_frontier.py or a Scrapy spider with frontier.scrapy.Scheduler runs on it.
`status` prints pages fetched and by outcome, the queue (total and top hosts), leases, the seen-set, the
Bloom filter (from its snapshot) and the last runs; `--json` prints the same as one JSON object. `export`
prints one URL a line: `queued` and `suspected` (the low queues: URLs queued as suspected crawler traps, those
a done crawl skipped; frontier.crawl.traps) from LMDB (host by host, FIFO); `fetched`, `failed` and `skipped` from the
crawl log (output.log, by default DATA_DIR/crawl.jsonl), judged by each URL's last record (see
`frontier.cli.crawlinfo.logged_urls`). For a crawl with storage.backend: redis, `status --config` reads the state
every instance shares from the server (counts, queue and top hosts, leases by instance, seen URLs; read only,
beside running instances) and this instance's outcomes and runs from its data dir; `export` reads LMDB data
dirs only, but `--what due` (the revisit schedule every instance shares, from the server). Exit status: 0; 2 bad
arguments, not a data dir, or a Redis server that cannot be read.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from itertools import islice
from pathlib import Path
from collections.abc import Iterable
from typing import Any, TextIO

from frontier.cli.prestart import read_config
from frontier.config import LOG_FILE_NAME
from frontier.errors import ConfigError, FrontierError

STATUS_HELP = "show a crawl's data dir: pages, queue, leases, seen-set, Bloom filter, runs (also while it runs)"
EXPORT_HELP = ("print the fetched, failed, skipped, queued, suspected or due URLs of a crawl's data dir, one a line "
               "(due: with its due time, interval and last change)")


# -- arguments ------------------------------------------------------------------------------------------------


def _where(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("data_dir", nargs="?", type=Path, help="the crawl's storage.data_dir")
    parser.add_argument("--config", type=Path, help="crawl.yaml: its storage.data_dir (and output.log)")


def status_arguments(parser: argparse.ArgumentParser) -> None:
    _where(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object instead of text")
    parser.add_argument("--top", type=int, default=10, help="hosts listed by queued URLs (default 10)")
    parser.add_argument("--runs", type=int, default=5, help="last runs listed (default 5)")


def export_arguments(parser: argparse.ArgumentParser) -> None:
    from frontier.cli.crawlinfo import WHAT

    _where(parser)
    parser.add_argument("--what", choices=WHAT, required=True, help="which URLs")
    parser.add_argument("--output", "-o", type=Path, help="write here instead of stdout")
    parser.add_argument("--log", type=Path, help="the crawl log (default: output.log of --config, else "
                                                 f"DATA_DIR/{LOG_FILE_NAME})")


def _config(args: argparse.Namespace) -> Any:
    """The CrawlConfig of --config, None for DATA_DIR (one of them must be given)."""
    if (args.data_dir is None) == (args.config is None):
        args.parser.error("give DATA_DIR or --config crawl.yaml (one of them)")
    if args.config is None:
        return None
    try:
        return read_config(args.config)
    except ConfigError as e:  # not one of this command's options: said as the file's
        args.parser.error(f"{args.config}: {e}")


def _locate(args: argparse.Namespace, cfg: Any) -> tuple[Path, Path]:
    """(data dir, crawl log) of DATA_DIR or of the config `cfg` (an LMDB crawl)."""
    if cfg is None:
        return args.data_dir, args.data_dir / LOG_FILE_NAME
    if cfg.storage.backend != "lmdb":
        args.parser.error(f"{args.config}: the crawl state is in {cfg.storage.backend} (storage.backend), not in a "
                          "data dir; export reads LMDB data dirs (and --what due from the server)")
    return cfg.storage.data_dir, cfg.log_path


# -- status ---------------------------------------------------------------------------------------------------


def status(args: argparse.Namespace) -> int:
    from frontier.cli.crawlinfo import read_redis_status, read_status

    cfg = _config(args)
    top, runs = max(0, args.top), max(0, args.runs)
    try:
        if cfg is not None and cfg.storage.backend == "redis":
            info = read_redis_status(cfg, top=top, runs=runs)
            text = format_redis_status(info)
        else:
            info = read_status(_locate(args, cfg)[0], top=top, runs=runs)
            text = format_status(info)
    except FrontierError as e:
        args.parser.error(str(e))
    return _write([json.dumps(info, indent=2, default=str) if args.json else text], sys.stdout)


def _n(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {n:,}" for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def format_status(info: dict[str, Any]) -> str:
    """The text `status` prints for a `read_status` dict."""
    stop = {"running": f"running (pid {info['running']})", "clean": "stopped cleanly",
            "unclean": "stopped without a clean stop (killed or crashed)"}[info["last_stop"]]
    pages, queue, leases, bloom = info["pages"], info["queue"], info["leases"], info["bloom"]
    lines = [f"data dir   {info['data_dir']}: {stop}; canonical rules {info['canonical'] or '?'}",
             f"pages      {_n(pages['fetched'])} of the site fetched (an HTTP response), {_n(pages['attempts'])} "
             "attempts (crawl-wide)"]
    lines += _outcomes(pages, "this data dir's runs")
    lines.append(_queued(queue) + (f" ({queue['requests']:,} Scrapy requests)" if queue["requests"] else "")
                 + (f"; {queue['parked']:,} links parked for a seen-test sweep (the next run queues the new ones)"
                    if queue.get("parked") else ""))
    lines += _top_hosts(queue)
    lines += format_suspected(info["suspected"], "status")
    lines += _long_delays(info)
    lines += _revisits(info["revisits"]) if "revisits" in info else []
    in_flight = leases["in_flight_at_last_stop"]
    lines.append(f"leases     {'' if in_flight is None else f'{in_flight:,} in flight at the last stop; '}"
                 f"{leases['note']}")
    lines.append(f"hosts      {info['hosts']['known']:,} known, {info['hosts']['robots_cached']:,} robots.txt cached")
    lines.append(f"seen       {info['seen']['urls']:,} URLs")
    if bloom is None:
        lines.append("bloom      no snapshot (a clean stop writes one; a start deletes it)")
    else:
        when = "current: the last clean stop" if bloom["current"] else \
            "stale: not the one the last clean stop named; the next start rebuilds the filter from the log"
        lines.append(f"bloom      fill {bloom['fill_ratio']:.4f}, est. false-positive rate "
                     f"{bloom['estimated_false_positive_rate']:.3g}, {bloom['items']:,} items of capacity "
                     f"{bloom['capacity']:,}, {bloom['generations']} generation{'s' * (bloom['generations'] > 1)}, "
                     f"{bloom['bytes'] / 1e6:,.1f} MB ({when})")
    lines += _format_runs(info["runs"])
    return "\n".join(lines)


def _revisits(revisits: dict[str, Any], where: str = "DATA_DIR") -> list[str]:
    """The revisit line (revisit.after): how many URLs are due now and when the next are; none without revisits.
    `where`: what `export` is given to list them."""
    if not revisits["scheduled"]:
        return []
    due = revisits["next_due"]
    later = "none later" if due is None else \
        f"next due {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(due))} (in {due - time.time():,.0f} s)"
    return [f"revisits   {revisits['scheduled']:,} URLs scheduled, {revisits['due_now']:,} due now (the next run "
            f"fetches them), {later} (list them: python -m frontier export {where} --what due)"]


def format_suspected(rows: list[dict[str, Any]], where: str, top: int = 10) -> list[str]:
    """Lines naming the URLs left in low queues per host and pattern (`frontier.crawl.traps.suspected_rows`), the
    `top` largest; `where` "status" indents them as its other lines, "summary" for run_frontier.py's."""
    if not rows:
        return []
    total = sum(row["urls"] for row in rows)
    head = "suspected  " if where == "status" else "suspected traps: "
    lines = [f"{head}{total:,} URLs still queued as suspected traps: their pattern kept growing past its budget "
             "(traps.max_suspect_pages) or was not reached (list them: python -m frontier export DATA_DIR --what "
             "suspected; release one: traps.release: [\"HOST PATTERN\"] in the config, the next run fetches it)"]
    width = max(len(row["host"]) for row in rows[:top])
    lines += [f"           {row['host']:<{width}}  {row['pattern']}  {row['urls']:,}{_growth(row)}"
              for row in rows[:top]]
    if len(rows) > top:
        lines.append(f"           ... and {len(rows) - top:,} more host/pattern pairs")
    return lines


def _growth(row: dict[str, Any]) -> str:
    """The pattern's growth figures of a suspected row, when the trap detector knows it."""
    if "fetched" not in row:
        return ""
    return (f"  (fetched {row['fetched']:,}, new per page {row['new_per_page']:g}, queued {row['queued']:,}"
            f"{', growing' if row['growing'] else ''})")


def _queued(queue: dict[str, Any]) -> str:
    return f"queued     {queue['queued']:,} URLs on {queue['hosts']:,} host{'' if queue['hosts'] == 1 else 's'}"


def _top_hosts(queue: dict[str, Any]) -> list[str]:
    width = max((len(h["host"]) for h in queue["top_hosts"]), default=0)
    return [f"           {h['host']:<{width}}  {h['queued']:>10,} queued  {h['fetched']:>10,} fetched"
            for h in queue["top_hosts"]]


def _outcomes(pages: dict[str, Any], whose: str) -> list[str]:
    """The recorded counts (frontier.cli.crawlinfo.recorded_counts), each line saying whose they are."""
    lines = [f"{label:<10} {_counts(pages[key])}" for label, key in
             (("outcomes", "outcomes"), ("own reqs", "own_requests"), ("other", "other")) if pages[key]]
    if lines:
        lines.append(f"           (of the site's pages; the crawler's own requests: robots.txt, soft-404 probes, "
                     f"sitemaps; links refused and robots.txt/sitemap results: {whose}, from summary.json, "
                     f"{pages['as_of'] or '?'}; runs killed before a clean stop are not in it)")
    return lines


def format_redis_status(info: dict[str, Any]) -> str:
    """The text `status` prints for a `read_redis_status` dict."""
    pages, queue, leases, hosts = info["pages"], info["queue"], info["leases"], info["hosts"]
    created = info["created"]
    lines = [f"crawl      {info['crawl']!r} on {info['server']} (storage.backend redis): {created.get('groups', '?')} "
             f"slot groups, canonical rules {created.get('canonical', '?')}; this instance's data dir "
             f"{info['data_dir']}",
             f"pages      {pages['fetched']:,} of the site fetched (an HTTP response), {pages['attempts']:,} attempts "
             "(crawl-wide: every instance)"]
    lines += _outcomes(pages, "this instance's runs")
    lines.append(_queued(queue))
    lines += _top_hosts(queue)
    lines += format_suspected(info["suspected"], "status")
    lines += _long_delays(info)
    by = ", ".join(f"{n:,} instance {inst}" for inst, n in sorted(leases["by_instance"].items()))
    lines.append(f"leases     {leases['in_flight']:,} in flight{f' ({by})' if by else ''}; {leases['overdue']:,} "
                 "overdue (their instance died or stalls: any instance expires them)")
    lines.append(f"hosts      {hosts['known']:,} known, {hosts['unreachable']:,} held back as unreachable")
    lines += _revisits(info["revisits"], "--config CRAWL.yaml") if "revisits" in info else []
    lines.append(f"seen       {info['seen']['urls']:,} URLs" +
                 ("" if info["budget"] is None else f"; page budget used {info['budget']:,} (limits.max_pages)"))
    lines += _format_runs(info["runs"])
    return "\n".join(lines)


def _long_delays(info: dict[str, Any]) -> list[str]:
    """The line on hosts whose robots.txt Crawl-delay is over politeness.max_crawl_delay (none without any)."""
    from frontier.crawl.robots import long_delay_line

    line = long_delay_line(info.get("long_crawl_delay"), info["pages"]["other"].get("robots_crawl_delay", 0))
    return [] if line is None else [f"politeness {line}"]


def _format_runs(runs: list[dict[str, Any]]) -> list[str]:
    lines = []
    for run in runs:
        done = "done" if run.get("done") else "not done"
        work = f"  {run['fetched']:,} fetched in {run.get('elapsed_seconds', '?')} s" if "fetched" in run else ""
        rate = f" ({run['pages_per_second']:,} pages/s)" if "pages_per_second" in run else ""
        note = f"; {run['note']}" if run.get("note") else ""
        lines.append(f"run        {run.get('started_at', '?')} .. {run.get('ended_at', '?')}  exit {run.get('exit_code')}"
                     f"  {done}{work}{rate}{note}")
    return lines


# -- export ---------------------------------------------------------------------------------------------------


def export(args: argparse.Namespace) -> int:
    from frontier.cli.crawlinfo import due_urls, logged_urls, queued_urls, redis_due_urls, suspected_urls

    cfg = _config(args)
    if args.what == "due" and cfg is not None and cfg.storage.backend == "redis":  # the schedule on the server
        return _output(args, (f"{url}\t{_iso(due)}\t{interval:.0f}\t{_iso(changed)}"
                              for url, due, interval, changed in redis_due_urls(cfg)))
    data_dir, log_path = _locate(args, cfg)
    log_path = args.log or log_path
    try:
        if args.what == "queued":
            urls = queued_urls(data_dir)
        elif args.what == "suspected":
            urls = (url for _, url in suspected_urls(data_dir))
        elif args.what == "due":  # URL, due time, interval (s) and last change, tab-separated, earliest due first
            urls = (f"{url}\t{_iso(due)}\t{interval:.0f}\t{_iso(changed)}"
                    for url, due, interval, changed in due_urls(data_dir))
        else:
            if not log_path.is_file():
                args.parser.error(f"{log_path}: no crawl log ({args.what} URLs come from the crawl log that "
                                  "run_frontier.py writes; give it with --log)")
            exclude = queued_urls(data_dir) if args.what == "failed" else ()
            urls = logged_urls(log_path, args.what, exclude=exclude)
    except FrontierError as e:
        args.parser.error(str(e))
    return _output(args, urls)


def _output(args: argparse.Namespace, urls: Iterable[str]) -> int:
    """Write `urls` to --output or stdout; a FrontierError on the way (a server that cannot be read) is exit 2."""
    try:
        if args.output is None:
            return _write(urls, sys.stdout)
        with open(args.output, "w", encoding="utf-8") as out:
            return _write(urls, out)
    except FrontierError as e:
        args.parser.error(str(e))
    return 0  # not reached


def _iso(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def _write(lines: Any, out: TextIO) -> int:
    """Write lines (4096 at a time); a reader that stops early (`| head`) is no error."""
    try:
        for batch in _batched(lines, 4096):
            out.write("\n".join(batch) + "\n")
        out.flush()
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
    return 0


def _batched(items: Any, size: int) -> Any:
    it = iter(items)
    while batch := list(islice(it, size)):
        yield batch
