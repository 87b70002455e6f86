"""The crawl engine: the frontier process and the scheduling it runs over the crawl-state seam, the same for every
backend.

    scheduler   `Frontier`, the public API that drives a `CrawlState`: seeds in, leased jobs out, results back
    leasing     the jobs `Frontier.lease` hands out (trap suspects rerouted), leases that end without a result
    reporting   `Frontier.report`: a batch of results accepted, acked, committed with their links, counted
    adaptive    adaptive politeness: a host's pause after a result, from its server's latency
    counts      this process's counts of its crawl (`Frontier.counts`)
    priorities  the priorities of a report's outlinks, merged from the caller's or the scorers' values
    intake      seeds and a page's links and redirect -> canonical, in-scope `Link`s with depth
    robots      robots.txt rules per host (parsed by frontier.url.robots, stored by the state), what a result does
    retry       what a page result does to its URL: done, retry after a backoff, or hold
    sitemaps    seeds_from_sitemaps: a seed host's sitemaps, and the payload that marks a queued sitemap
    traps       crawler-trap detection: near-duplicate URL patterns, soft 404s
    trap_state  the trap detector's per-host and per-pattern records and their byte format
    messages    what crosses the queues between the frontier process and the workers (FetchJob, FetchResult)
    events      the crawl log record of each attempt; log writes them (crawl.jsonl, summary, run history)
    process     the frontier process (run_frontier.py spawns it): the loop over the queues, snapshots, stats
    child       what every spawned process does first (logging, its name, dying with its supervisor)
    progress    the progress display; metrics: the Prometheus endpoint

May import: frontier.state, frontier.seen, frontier.url, frontier.config and the base (errors, lazy, native); never
cli, scrapy or workers. `frontier.state` never imports this package.
"""
