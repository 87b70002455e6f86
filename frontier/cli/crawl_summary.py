"""What a crawl run did, printed when it ends: from the summary.json its frontier process wrote.

The headline (this instance's pages and the crawl-wide counts), this instance's outcomes, own requests and
refused links, the suspected traps, where the crawl log, summary, run history and WARC files are; on stderr,
the seeds that could not be reached. Printed by the crawl command (frontier.cli.supervisor).
"""

from __future__ import annotations

import sys

from frontier.config import CrawlConfig
from frontier.crawl.log import RunHistory, other_reasons
from frontier.crawl.process import EXIT_STOPPED, EXIT_UNREACHABLE, RunInfo
from frontier.crawl.robots import long_delay_line


def print_counts(label: str, counts: dict[str, int]) -> None:
    if counts:
        print(f"{label}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])))


def print_summary(cfg: CrawlConfig, run: RunInfo, code: int) -> None:
    """What this run did, from summary.json (written by the frontier process when it stopped)."""
    history = RunHistory(cfg.storage.data_dir)
    summary = history.summary()
    last = summary.get("last_run") or {}
    if code not in (0, EXIT_UNREACHABLE, EXIT_STOPPED) or last.get("run_id") != run.run_id:
        return
    headline = "crawl done" if summary["done"] else "crawl stopped; rerun the same command to resume"
    runs = summary["runs"]
    print(f"\n{headline}: {last['fetched']} pages fetched ({last['attempts']} attempts) in {last['elapsed_seconds']} s "
          f"({last['pages_per_second']} pages/s) by this instance; crawl-wide: {summary['fetched']} pages fetched "
          f"({summary['attempts']} attempts) over {runs} run{'s' if runs != 1 else ''}, "
          f"{summary['queued']} still queued")
    print_counts("outcomes (this instance's pages)", last.get("outcomes", {}))
    print_counts("the crawler's own requests (this instance)", last.get("own_requests", {}))
    print_counts("links refused and other events (this instance)", other_reasons(last))
    long_delays = long_delay_line(summary.get("long_crawl_delay"),
                                  summary.get("reasons", {}).get("robots_crawl_delay", 0))
    if long_delays is not None:
        print(long_delays)
    from frontier.cli.ops import format_suspected

    for line in format_suspected(summary.get("suspected") or [], "summary"):
        print(line.replace("DATA_DIR", str(cfg.storage.data_dir)))
    print(f"crawl log: {summary['crawl_log']}\nsummary:   {history.summary_path}\nruns:      {history.runs_path}")
    if cfg.output.warc is not None:
        from workers.warc import worker_warc_path

        n = cfg.workers.processes
        more = f" ... {worker_warc_path(cfg.output.warc, n - 1).name}" if n > 1 else ""
        print(f"warc:      {worker_warc_path(cfg.output.warc, 0)}{more} (one file per worker process)")
    sys.stdout.flush()
    unreachable = summary.get("unreachable_seeds") or []
    if code == EXIT_UNREACHABLE and unreachable:
        for url, why in unreachable:
            print(f"frontier: seed {url} unreachable: {why}", file=sys.stderr)
        them = "it" if len(unreachable) == 1 else "them"
        print(f"frontier: {len(unreachable)} seed{'s' if len(unreachable) != 1 else ''} could not be reached; "
              f"rerun the same command to try {them} again", file=sys.stderr, flush=True)
