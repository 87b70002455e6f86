"""The JSONL crawl log: appends across runs, and a line torn by a crash never swallows the next record."""

from __future__ import annotations

import json
from pathlib import Path

from frontier.crawllog import CrawlLog


def test_appends_one_json_object_per_line(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "crawl.jsonl"
    with CrawlLog(path) as log:
        log.write({"url": "http://a/", "status": "ok"})
        log.write({"url": "http://b/", "status": "fail", "reason": "timeout"})
    with CrawlLog(path) as log:
        log.write({"url": "http://c/", "status": "ok"})
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["url"] for r in records] == ["http://a/", "http://b/", "http://c/"]


def test_a_torn_last_line_stays_alone(tmp_path: Path) -> None:
    path = tmp_path / "crawl.jsonl"
    path.write_text('{"url":"http://a/"}\n{"url":"http://b/","sta')  # a crash cut the last write
    with CrawlLog(path) as log:
        log.write({"url": "http://c/"})
    lines = path.read_text().splitlines()
    assert lines[1] == '{"url":"http://b/","sta'
    assert json.loads(lines[2]) == {"url": "http://c/"}
