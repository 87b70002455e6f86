"""The crawl-state room: everything one crawl shares between its frontier instances, behind one seam.

`base` draws the seam; `lmdb` keeps the state in one machine's LMDB environment; the `redis_*` modules keep it
in Redis or Valkey (single node or Cluster), shared by any number of instances: `redis_conn` (connecting
safely from a URL, loading the Functions library), `redis_keys` (key names and the slot groups that spread
them over a Cluster), `redis_lua` (the server-side functions), `redis_seen` (`RedisSeen`, the seen-test),
`redis_state` (`RedisCrawlState`, the whole crawl state).
`recrawl_spool` is the file format of `python -m frontier recrawl` that the LMDB state applies. Only the `redis_*`
modules import redis-py, and nothing imports them unless Redis is asked for.

May import: frontier.seen, frontier.url, frontier.config and the base (errors, lazy, native); never crawl, cli,
scrapy or workers.
"""
