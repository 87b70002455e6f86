"""WARC output: a worker writes request/response records that warcio reads back, per worker file."""

from __future__ import annotations

from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from frontier.config import load_config
from frontier.messages import FetchJob, Status
from frontier.scope import Scope
from frontier.testing import SiteSpec
from frontier.testing.mockweb import MockWeb
from workers.fetcher import Fetcher
from workers.warc import worker_warc_path


async def test_fetched_pages_are_archived(tmp_path: Path) -> None:
    async with MockWeb(SiteSpec(pages=20, hosts=1, errors=False, redirects=False)) as web:
        host = web.base_urls[0].split("://", 1)[1]
        cfg = load_config({"seeds": [web.seed], "scope": {"allowed_hosts": [host]},
                           "storage": {"data_dir": str(tmp_path / "data")},
                           "output": {"warc": str(tmp_path / "crawl.warc.gz")}})
        urls = [web.seed] + [f"{web.base_urls[0]}/p/{i}.html" for i in range(1, 4)]
        async with Fetcher(cfg, Scope.from_config(cfg), worker_id=3) as fetcher:
            results = [await fetcher.fetch(FetchJob(url, 0, url.encode())) for url in urls]
        assert all(r.status is Status.OK for r in results), [r.reason for r in results]

    path = worker_warc_path(cfg.output.warc, 3)
    assert path.exists() and path.name == "crawl-w3.warc.gz"
    with open(path, "rb") as f:
        records = [(r.rec_type, r.rec_headers.get_header("WARC-Target-URI"),
                    r.http_headers.get_statuscode() if r.http_headers and r.rec_type == "response" else None,
                    r.content_stream().read() if r.rec_type == "response" else b"")
                   for r in ArchiveIterator(f)]
    responses = {uri: (status, body) for kind, uri, status, body in records if kind == "response"}
    requests = {uri for kind, uri, _, _ in records if kind == "request"}
    assert set(responses) == set(urls) and requests == set(urls)
    for (status, body), result in zip((responses[u] for u in urls), results):
        assert status == "200" and len(body) == result.bytes and b"<a " in body
