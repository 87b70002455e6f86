"""The seen-test: "have we seen this URL?", at crawl speed, shared by processes, durable.

Owns: `urlseen` (URLSeen, MemorySeen: the tiers together), `bloom` and `blocked` (SharedBloom, both layouts),
`counting` (CountingBloom), `lru`, `fingerprint` (URL -> 16 bytes), `fplog`, `fpruns`, `fpset`, `parked` and
`datadir` (the exact fingerprint log), `positions`, `sizing`, `shm` (shared memory), `blacklist` and `spool`
(the blacklist file and its bulk load).
May import: frontier.url, frontier.native, frontier.errors, frontier.config, frontier.lazy; never crawl, state,
cli, scrapy or workers.
"""
