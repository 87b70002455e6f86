"""The crawl benchmark (`python -m frontier.bench crawl`): judging counts, and a smoke run of both crawlers."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from frontier.bench import crawl
from frontier.bench.judge import MB, CrawlRun, judge
from frontier.testing import PageKind, SiteGraph, SiteSpec

PORTS = [18001, 18002]


def _graph() -> SiteGraph:
    return SiteGraph(SiteSpec(pages=300, hosts=2, links_per_page=10, seed=3))


def _run(counts: dict[str, int]) -> CrawlRun:
    return CrawlRun("test", 0, 10.0, 50 * MB, counts, {"127.0.0.1:18001": [1.0, 3.0]}, PORTS,
                          links_found=500, crawl_seconds=5.0)


def test_judge_a_correct_crawl_has_no_duplicates_and_no_misses() -> None:
    graph = _graph()
    counts = dict(graph.expected_requests(PORTS))
    j = judge(_run(counts), graph)
    robots = sum(1 for url in counts if url.endswith("/robots.txt"))
    assert (j.duplicates, j.missed, j.unexpected, j.retries_5xx, j.robots_disallowed) == (0, 0, 0, 0, 0)
    assert j.pages == sum(counts.values()) - robots
    assert j.pages_per_s == pytest.approx(j.pages / 10.0)
    assert j.active_pages_per_s == pytest.approx(j.pages / 2.0)
    assert j.links_per_s == pytest.approx(100.0)
    assert j.peak_rss_mb == pytest.approx(50.0)


def test_judge_uses_canonical_forms_and_counts_5xx_retries_apart() -> None:
    graph = _graph()
    counts = dict(graph.expected_requests(PORTS))
    pages = [url for url in counts if not url.endswith("/robots.txt")]
    errors = [url for url in pages if graph.kind(graph.page_at(urlsplit(url).path)) == PageKind.SERVER_ERROR]
    assert errors
    normal = next(url for url in pages if url.endswith(".html") and url not in errors and "/p/" in url)
    origin, _, path = normal.partition("/p/")
    counts[f"{origin}/x/../p/{path}"] = 1  # another spelling of one page: a duplicate fetch
    missing = next(url for url in pages if url != normal and url not in errors)
    del counts[missing]
    for url in errors:
        counts[url] = 4  # retried three times
    j = judge(_run(counts), graph)
    assert j.duplicates == 1
    assert j.missed == 1
    assert j.retries_5xx == 3 * len(errors)
    assert j.unexpected == 0


def test_table_and_verdict() -> None:
    graph = _graph()
    good = judge(_run(dict(graph.expected_requests(PORTS))), graph)
    slow = dataclasses.replace(good, crawler="Scrapy", pages_per_s=good.pages_per_s / 10)
    table = crawl.format_table([good, slow])
    assert table.splitlines()[0].startswith("| crawler")
    assert "duplicate fetches" in table and "missed pages" in table
    ratio, passed, line = crawl.verdict(good, slow)
    assert passed and ratio == pytest.approx(10.0) and "PASS (10.00x)" in line
    assert crawl.verdict(slow, good)[1] is False


def _row(output: str, name: str) -> dict[str, str]:
    lines = output.splitlines()
    header = next(line for line in lines if line.startswith("| crawler"))
    row = next(line for line in lines if line.startswith(f"| {name} "))
    keys = [c.strip() for c in header.strip("|").split("|")]
    return dict(zip(keys, (c.strip() for c in row.strip("|").split("|"))))


@pytest.mark.timeout(90)
def test_smoke_both_crawlers_complete_and_the_table_prints(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("scrapy")  # bench extras
    pytest.importorskip("psutil")
    code = crawl.main(["--pages", "300", "--links", "10", "--hosts", "2", "--concurrency", "16", "--processes", "1",
                       "--timeout", "80"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "command: python -m frontier.bench crawl --pages 300" in out
    assert "machine:" in out and "cores" in out
    frontier, scrapy = _row(out, "frontier"), _row(out, "Scrapy")
    assert frontier["duplicate fetches"] == "0" and frontier["missed pages"] == "0"
    assert int(frontier["pages"].replace(",", "")) > 200 and int(scrapy["pages"].replace(",", "")) > 200
    assert "target: >= 5x Scrapy's pages/s with zero duplicate fetches and zero missed pages:" in out


def test_small_site_preset_is_judged_by_wall_time() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    crawl.add_arguments(parser)
    settings = crawl.settings_from_args(parser.parse_args(["--small"]))
    assert (settings.pages, settings.hosts, settings.links, settings.errors, settings.small) == (
        crawl.SMALL_PAGES, 1, crawl.SMALL_LINKS, False, True)
    assert crawl.settings_from_args(parser.parse_args(["--small", "--hosts", "3"])).hosts == 3
    graph = _graph()
    fast = judge(_run(dict(graph.expected_requests(PORTS))), graph)  # 10 s wall
    slow = dataclasses.replace(fast, crawler="Scrapy", wall=60.0, pages_per_s=fast.pages_per_s)
    ratio, passed, line = crawl.verdict(fast, slow, wall_time=True)
    assert passed and ratio == pytest.approx(6.0) and "faster than Scrapy in wall time" in line
    assert crawl.verdict(fast, slow)[1] is False  # same pages/s


def test_frontier_processes_are_labelled_by_their_names_or_their_order() -> None:
    named = crawl._frontier_labels([("main", 1.0), ("frontier", 2.0), ("worker-0", 3.0), ("spawned", 4.0)])
    assert named == [("supervisor", 1.0), ("frontier process", 2.0), ("worker", 3.0), ("worker", 4.0)]
    unnamed = crawl._frontier_labels([("main", 1.0), ("spawned", 2.0), ("spawned", 3.0), ("resource_tracker", 0.1)])
    assert unnamed == [("supervisor", 1.0), ("frontier process", 2.0), ("worker", 3.0), ("resource_tracker", 0.1)]


def _tiny_site(root: Path, pages: int = 12) -> None:
    """A static site: an index linking every page, each page linking the next, one dead link, a stylesheet."""
    (root / "sub").mkdir(parents=True)
    (root / "style.css").write_text("body {}")
    links = "".join(f'<a href="sub/p{i}.html">{i}</a>' for i in range(pages))
    (root / "index.html").write_text(f'<html><head><link rel="stylesheet" href="style.css"></head><body>{links}'
                                     '<a href="gone.html">dead</a></body></html>')
    for i in range(pages):
        (root / "sub" / f"p{i}.html").write_text(f'<html><body><a href="p{(i + 1) % pages}.html">next</a>'
                                                 '<a href="../index.html#top">home</a></body></html>')


def test_static_site_serves_its_directory_only(tmp_path: Path) -> None:
    from frontier.bench.site import StaticSite

    _tiny_site(tmp_path / "site")
    site = StaticSite(tmp_path / "site")
    assert site.file_for("/") == (tmp_path / "site" / "index.html").resolve()
    assert site.file_for("/sub/p%31.html") == (tmp_path / "site" / "sub" / "p1.html").resolve()
    (tmp_path / "secret.html").write_text("no")
    for outside in ("/../secret.html", "/%2e%2e/secret.html", "/sub/../../secret.html", "/missing.html"):
        assert site.file_for(outside) is None, outside


def _needs_nginx() -> None:
    from frontier.bench.nginx import nginx_path

    if nginx_path() is None:
        pytest.skip("nginx is not installed (CI images may lack it; apt-get install nginx-light)")


@pytest.mark.timeout(30)
def test_nginx_site_serves_its_directory_only_and_counts_from_its_log(tmp_path: Path) -> None:
    from urllib.error import HTTPError
    from urllib.request import urlopen

    from frontier.bench.nginx import NginxSite

    _needs_nginx()
    _tiny_site(tmp_path / "site")
    (tmp_path / "secret.html").write_text("no")
    with NginxSite(tmp_path / "site") as site:
        base = site.base_urls[0]
        assert urlopen(site.seed).headers["Content-Type"].startswith("text/html")
        assert urlopen(base + "/sub/p%31.html").read() == (tmp_path / "site" / "sub" / "p1.html").read_bytes()
        urlopen(base + "/")
        for outside in ("/../secret.html", "/%2e%2e/secret.html", "/sub/../../secret.html", "/missing.html"):
            with pytest.raises(HTTPError):
                urlopen(base + outside)
        stats = site.stats()
        process = site._proc
    assert process is not None and process.poll() is not None  # stopped with the context
    assert stats["html"] == 3
    assert stats["counts"][base + "/sub/p%31.html"] == 1  # keyed by the target as received
    assert stats["statuses"][base + "/"] == 200 and stats["statuses"][base + "/missing.html"] == 404
    assert sum(stats["counts"].values()) == len(stats["times"][base.split("://", 1)[1]]) >= 6


@pytest.mark.timeout(90)
@pytest.mark.parametrize("server", ["aiohttp", "nginx"])
def test_site_dir_crawls_a_real_directory_with_frontier_and_wget(tmp_path: Path, server: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("psutil")
    if server == "nginx":
        _needs_nginx()
    _tiny_site(tmp_path / "site")
    only = ["--only", "frontier"] + (["--only", "wget"] if crawl.wget_path() else [])
    code = crawl.main(["--site-dir", str(tmp_path / "site"), *only, "--processes", "1", "--concurrency", "4",
                       "--timeout", "60", "--server", server])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"served by {'nginx' if server == 'nginx' else 'frontier.bench.site (aiohttp)'}" in out, out
    frontier = _row(out, "frontier")
    assert (frontier["pages"], frontier["404s"], frontier["duplicate fetches"]) == ("13", "1", "0"), out
    if crawl.wget_path():
        wget = _row(out, "wget")
        assert (wget["pages"], wget["404s"]) == ("13", "1"), out
        assert int(wget["requests"]) == 15  # and the stylesheet
        assert "frontier / wget pages/s:" in out
        assert re.search(r"^frontier / wget CPU per page: \d+\.\d\dx$", out, re.M), out
        for row in (frontier, wget):  # CPU of the whole process tree per page
            pages = int(row["pages"])  # CPU s is printed to 0.005 s
            assert float(row["CPU ms/page"]) == pytest.approx(1000 * float(row["CPU s"]) / pages, abs=5.01 / pages)
