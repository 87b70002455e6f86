"""`frontier.scrapy.DurableFeed`: an item pipeline that writes each item to a JSON-lines file before its page
is acked, so a spider killed at any moment (kill -9) loses no item.

    SCHEDULER = "frontier.scrapy.Scheduler"                # in settings.py
    ITEM_PIPELINES = {"frontier.scrapy.DurableFeed": 900}
    FRONTIER_FEED = "items.jsonl"                          # appended to by every run; required
    FRONTIER_FEED_FSYNC = False                            # True: also fsync each item (power loss, not only kill -9)

Why: Scrapy's feed exports (`-o items.jsonl`) buffer items and write them in batches, and frontier's Scheduler
acks a page once its items went through the item pipelines: a kill -9 then loses the items of acked pages still
in the buffer (12 of 326 in one test). This pipeline writes and flushes each item in `process_item`, before the
page leaves the engine (the Scheduler's ack point), so every acked page's items are in the file (the kernel's
page cache survives the process; with FRONTIER_FEED_FSYNC, the disk has them).

At least once, not exactly once: a page fetched again after a kill (it was in flight, its items maybe written)
writes its items again; de-duplicate on a key of the item if it matters. A line torn by the kill (the process
died inside a write) is cut off when the file is next opened: its page was not acked, so it is fetched again.
A write that fails (a full disk) ends the process at once, logged, with status 3: raised, Scrapy would drop the
item and ack its page; so the page stays queued for the next run instead.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from itemadapter import ItemAdapter

from frontier.errors import ConfigError, StorageError

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.spiders import Spider

__all__ = ["DurableFeed"]

CHUNK = 1 << 20  # bytes read at a time looking back for a torn line's start
EXIT_WRITE_FAILED = 3  # as run_frontier's disk full
logger = logging.getLogger(__name__)


class DurableFeed:
    """Writes each item as one JSON line to `path` and flushes it (and fsyncs it with `fsync`) before
    returning it to the next pipeline. Owns the file: opened by `open_spider`, closed by `close_spider`."""

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._file: BinaryIO | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DurableFeed:
        path = crawler.settings.get("FRONTIER_FEED")
        if not path:
            raise ConfigError("give the file items are written to, e.g. FRONTIER_FEED = 'items.jsonl'",
                              key="FRONTIER_FEED")
        return cls(path, fsync=crawler.settings.getbool("FRONTIER_FEED_FSYNC"))

    def open_spider(self, spider: Spider | None = None) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a+b")
            self._cut_torn_line(self._file)
        except OSError as e:
            raise StorageError(f"FRONTIER_FEED: cannot open {self.path}: {e.strerror}") from None

    @staticmethod
    def _cut_torn_line(f: BinaryIO) -> None:
        """Cut a last line without its newline (a write a kill interrupted), so the file stays valid JSON lines."""
        end = f.seek(0, os.SEEK_END)
        if end == 0 or (f.seek(end - 1), f.read(1))[1] == b"\n":
            return
        start = end
        while start > 0:  # back a chunk at a time to the last newline
            start = max(0, start - CHUNK)
            f.seek(start)
            at = f.read(end - start).rfind(b"\n")
            if at >= 0:
                f.truncate(start + at + 1)
                return
        f.truncate(0)

    def process_item(self, item: Any, spider: Spider | None = None) -> Any:
        if self._file is None:
            raise StorageError("FRONTIER_FEED: the feed is not open (open_spider was not called)")
        line = json.dumps(ItemAdapter(item).asdict(), ensure_ascii=False, default=str).encode() + b"\n"
        try:
            self._file.write(line)
            self._file.flush()
            if self.fsync:
                os.fsync(self._file.fileno())
        except OSError as e:
            # raised, Scrapy would log it, drop the item and ack its page: the item lost for good
            logger.critical("frontier: FRONTIER_FEED: cannot write %s: %s; exiting at once so that the page is "
                            "fetched again by the next run", self.path, e.strerror)
            logging.shutdown()
            os._exit(EXIT_WRITE_FAILED)
        return item

    def close_spider(self, spider: Spider | None = None) -> None:
        f, self._file = self._file, None
        if f is not None:
            f.close()
