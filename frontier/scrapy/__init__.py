"""The Scrapy plugin: `DUPEFILTER_CLASS = "frontier.scrapy.DupeFilter"` (dupefilter) and
`SCHEDULER = "frontier.scrapy.Scheduler"` (scheduler). Both names are imported on first use, so the package
imports no Scrapy until a setting asks for it.

On top: may import every part of frontier (never workers).
"""

from __future__ import annotations

from frontier.lazy import lazy_getattr

__all__ = ["DupeFilter", "Scheduler"]

__getattr__ = lazy_getattr(__name__, {"DupeFilter": "frontier.scrapy.dupefilter",
                                      "Scheduler": "frontier.scrapy.scheduler"}, globals())
