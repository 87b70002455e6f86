"""URL rules: `canonical` (canonicalize, CanonicalRules), `scope` (which URLs a crawl may fetch), `robots`
(robots.txt rules of one host).

May import: frontier.native, frontier.errors, frontier.lazy; nothing above (no config, seen, state, crawl).
"""
