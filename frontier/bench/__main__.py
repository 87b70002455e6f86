"""`python -m frontier.bench <command> [options]`: run one benchmark; `--help` after a command for its options."""

from __future__ import annotations

import importlib
import sys

# command -> module with main(argv) -> int; imported only when chosen, so one bench's deps never load another's
COMMANDS: dict[str, str] = {
    "seen": "frontier.bench.seen",  # the seen-test: URLSeen, SharedBloom, rbloom, sets, canonicalize
    "crawl": "frontier.bench.crawl",  # frontier vs Scrapy crawling the mock web: pages/s, RSS, duplicates, misses
    "scrapy-plugin": "frontier.bench.scrapy_plugin",  # Scrapy + frontier.scrapy.DupeFilter vs defaults vs scrapy-redis
    "scale": "frontier.bench.scale",  # URLSeen from 1e6 to 1e8+ URLs: cost per URL per tenth, stalls, disk, writes
    "blacklist": "frontier.bench.blacklist",  # the file-backed blacklist at 1e6..1e8, extrapolated; counting vs plain
    "redis": "frontier.bench.redis",  # RedisSeen vs scrapy-redis's SADD (per URL, pipelined): rate, memory, server CPU
    "redis-crawl": "frontier.bench.redis_crawl",  # one crawl shared by 1, 2, 3 instances over Redis: pages/s, dups
    "redis-state": "frontier.bench.redis_state",  # one instance's lease/commit round trips: pages/s, request ids kept
    "redis-queue": "frontier.bench.redis_queue",  # server memory per queued URL: seen-set vs host queues
    "faults": "frontier.bench.faults",  # random fault schedules (kills, failovers, pauses, skew) and a checker
    "service": "frontier.bench.service",  # the URL Frontier gRPC service: URLs/s in (PutDiscovered, PutURLs) and out
    "ordering": "frontier.bench.ordering",  # fifo vs scorers vs an oracle: PageRank mass of the first 10% fetched
    "fuzz-links": "frontier.bench.fuzz_links",  # the link scanner against lexbor on random pages, for a time
    "page-cost": "frontier.bench.page_cost",  # extract_links on hostile pages: extra address space, RSS, CPU
    "traps": "frontier.bench.traps",  # trap defences on full-size webs: the trap site, a 100-host template web, corpus
    "revisit": "frontier.bench.revisit",  # a second pass with conditional GET (304s, bytes); adaptive vs fixed intervals
    "groups": "frontier.bench.groups",  # the frontier loop over 1,000 hosts per politeness.queue_by: pages/s
    "console-screenshots": "frontier.bench.console_screenshots",  # docs/img/console-*.png: the page during a crawl
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        print(f"usage: python -m frontier.bench {{{','.join(COMMANDS)}}} [options]", file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return importlib.import_module(COMMANDS[argv[0]]).main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
