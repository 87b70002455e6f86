"""Crawl scheduling on top of the crawl-state seam (frontier/state/base.py), the same for every backend.

    intake      seeds and a page's links and redirect -> canonical, in-scope `Link`s with depth
    robots      robots.txt rules per host (parsed here, stored by the state), and what a robots result does
    retry       what a page result does to its URL: done, retry after a backoff, or hold
    sitemaps    seeds_from_sitemaps: a seed host's sitemaps, and the payload that marks a queued sitemap
    events      the crawl log record of each attempt
    scheduler   `Frontier`, the public API that drives a `CrawlState`

`frontier.state` never imports this package.
"""
