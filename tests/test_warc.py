"""WARC output: a worker writes request/response records that warcio reads back, one file per worker."""

from __future__ import annotations

import json

import subprocess
from pathlib import Path

import yaml
from warcio.archiveiterator import ArchiveIterator

from crawlcmd import crawl_argv, crawl_env
from frontier.config import load_config
from frontier.crawl.messages import FetchJob, Status
from frontier.testing import SiteSpec
from frontier.testing.mockweb import MockWeb
from frontier.url.scope import Scope
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
                    r.content_stream().read() if r.rec_type == "response" else b"",
                    r.rec_headers.get_header("WARC-IP-Address"))
                   for r in ArchiveIterator(f)]
    responses = {uri: (status, body) for kind, uri, status, body, _ip in records if kind == "response"}
    requests = {uri for kind, uri, _, _, _ip in records if kind == "request"}
    assert set(responses) == set(urls) and requests == set(urls)
    # the server's address, as the results say, on every response (short pages' bodies come with their headers)
    assert {ip for kind, _uri, _status, _body, ip in records if kind == "response"} == {"127.0.0.1"}
    assert {r.address for r in results} == {"127.0.0.1"}
    for (status, body), result in zip((responses[u] for u in urls), results):
        assert status == "200" and len(body) == result.bytes and b"<a " in body


def test_a_crawl_writes_one_file_per_worker_and_names_them(tmp_path: Path) -> None:
    """output.warc names the set: crawl.warc.gz becomes crawl-w0.warc.gz, crawl-w1.warc.gz; the run says so."""
    with MockWeb.serve_in_thread(SiteSpec(pages=30, hosts=1, errors=False)) as web:
        config = tmp_path / "crawl.yaml"
        config.write_text(yaml.safe_dump({
            "seeds": [web.seed], "workers": {"processes": 2, "concurrency": 4}, "politeness": {"delay": 0},
            "storage": {"data_dir": str(tmp_path / "data")},
            "output": {"warc": str(tmp_path / "out" / "crawl.warc.gz"), "progress": "off"}}))
        proc = subprocess.run(crawl_argv(config), env=crawl_env(), capture_output=True, text=True, timeout=90, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert files == ["crawl-w0.warc.gz", "crawl-w1.warc.gz"]
    line = f"warc:      {tmp_path / 'out' / 'crawl-w0.warc.gz'} ... crawl-w1.warc.gz (one file per worker process)"
    assert line in proc.stdout.splitlines(), proc.stdout
    responses = set()
    for name in files:
        with open(tmp_path / "out" / name, "rb") as f:
            responses |= {r.rec_headers.get_header("WARC-Target-URI") for r in ArchiveIterator(f)
                          if r.rec_type == "response"}
    log = [json.loads(line) for line in (tmp_path / "data" / "crawl.jsonl").read_text().splitlines()]
    probes = {r["url"] for r in log if r["reason"] == "soft_404_probe"}  # answered 404: not archived, as no 4xx is
    assert len(probes) == 1
    assert responses == {u for u, n in web.snapshot()["counts"].items()} - probes  # robots.txt too
