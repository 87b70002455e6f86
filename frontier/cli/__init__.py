"""The operator's commands, `python -m frontier <command>` (frontier/__main__.py dispatches): `ops` (status,
export), `crawlinfo` (a read-only view of a data dir), `fresh`, `recrawl`, `blacklist`; `prestart` (a crawl.yaml
read, and the checks before a crawl starts); `supervisor` (`crawl`: its command line and run), with its
parts `supervision` (the crawl processes spawned, watched, restarted), `demo_web` and `crawl_summary`.

On top: may import every part of frontier; never workers, but for the crawl command (supervisor and its parts),
which starts them.
"""
