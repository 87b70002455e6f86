"""The operator's commands, `python -m frontier <command>` (frontier/__main__.py dispatches): `ops` (status,
export), `crawlinfo` (a read-only view of a data dir), `fresh`, `recrawl`, `blacklist`; `prestart` (a crawl.yaml
read, and the checks before a crawl starts); `supervisor` (`crawl`: it runs the processes).

On top: may import every part of frontier (never workers).
"""
