"""The JSONL crawl log: one line per fetch (and per URL skipped without one), appended across runs."""

from __future__ import annotations

import json
import os
from pathlib import Path


class CrawlLog:
    """Append-only JSON lines; `flush()` after each batch so a kill loses at most the batch in progress."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._file = open(self.path, "a", encoding="utf-8", buffering=1 << 16)
        if self._file.tell() and not self._ends_with_newline():
            self._file.write("\n")  # a line torn by a crash stays alone, never glued to this run's first
        self.lines = 0

    def _ends_with_newline(self) -> bool:
        with open(self.path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) == b"\n"

    def write(self, record: dict[str, object]) -> None:
        self._file.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        self.lines += 1

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        """Flush and close. Idempotent."""
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> "CrawlLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
