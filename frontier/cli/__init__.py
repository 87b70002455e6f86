"""The operator's commands, `python -m frontier <command>` (frontier/__main__.py dispatches): `ops` (status,
export), `crawlinfo` (a read-only view of a data dir), `fresh`, `recrawl`, `blacklist`.

On top: may import every part of frontier (never workers).
"""
