"""The trap defences on real sites none of us wrote: Debian documentation packages of four HTML
generators, served from their files by aiohttp's static handler on loopback, crawled by run_frontier.py with
the DEFAULT config (trap defences on; the only keys set are the seed, the data dir, `politeness.delay: 0`
for loopback and `output.progress: "off"`). The oracle is a walk of the files: every HTML file reachable
by <a href> links from the start page, inside the served directory. The test fails if one is not fetched.

    site                    package                      generator  served directory
    python3-doc             python3-doc                  Sphinx     /usr/share/doc/python3-doc/html
    libstdc++ API           libstdc++-12-doc             Doxygen    /usr/share/doc/gcc-12-base/libstdc++/user
    commons-lang3 API       libcommons-lang3-java-doc    javadoc    /usr/share/doc/libcommons-lang3-java/api
    Debian Reference        debian-reference-en          DocBook    /usr/share/debian-reference

libstdc++'s docs are crawled as the Doxygen API sub-tree (user/, complete: links out of it are 404s here), not
the DocBook manual beside it. A missing package is a skip that names it (.ci/run installs them, best effort).
"""

from __future__ import annotations

import posixpath
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple
from urllib.parse import unquote, urljoin, urlsplit

import pytest
from selectolax.lexbor import LexborHTMLParser

from faultkit import CrawlRun, assert_group_gone, read_crawl_log, read_summary, write_config
from frontier.testing.mockweb import new_loop

pytestmark = pytest.mark.timeout(600)

RUN_TIMEOUT = 420.0


class Corpus(NamedTuple):
    name: str
    package: str
    generator: str
    root: Path
    start: str  # the start page, relative to root


CORPORA = [
    Corpus("python3-doc", "python3-doc", "Sphinx", Path("/usr/share/doc/python3-doc/html"), "index.html"),
    Corpus("libstdc++ API", "libstdc++-12-doc", "Doxygen", Path("/usr/share/doc/gcc-12-base/libstdc++/user"),
           "index.html"),
    Corpus("commons-lang3 API", "libcommons-lang3-java-doc", "javadoc", Path("/usr/share/doc/libcommons-lang3-java/api"),
           "index.html"),
    Corpus("Debian Reference", "debian-reference-en", "DocBook", Path("/usr/share/debian-reference"), "index.en.html"),
]


def oracle(root: Path, start: str) -> set[str]:
    """The paths (relative to root, "/"-separated) of the HTML files reachable from `start` by <a href>."""
    found, todo = {start}, [start]
    while todo:
        rel = todo.pop()
        tree = LexborHTMLParser((root / rel).read_bytes())
        for node in tree.css("a[href]"):
            href = (node.attributes.get("href") or "").strip()
            parts = urlsplit(urljoin("http://h/" + rel, href))
            if parts.scheme != "http" or parts.netloc != "h":
                continue
            path = posixpath.normpath(unquote(parts.path)).lstrip("/")
            if path.endswith("/"):
                path += "index.html"
            if path in found or not path.endswith((".html", ".htm")) or path.startswith(".."):
                continue
            if (root / path).is_file():
                found.add(path)
                todo.append(path)
    return found


class StaticServer:
    """aiohttp's static file handler over `root` on 127.0.0.1, in a thread of its own."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = 0
        self._ready = threading.Event()
        self._stop: object = None
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        import asyncio

        from aiohttp import web

        async def main() -> None:
            app = web.Application()
            app.router.add_static("/", self.root, follow_symlinks=True)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.port = runner.addresses[0][1]
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            self._stop = lambda: loop.call_soon_threadsafe(stop.set)
            self._ready.set()
            await stop.wait()
            await runner.cleanup()

        loop = new_loop()
        try:
            loop.run_until_complete(main())
        finally:
            loop.close()

    def __enter__(self) -> "StaticServer":
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("static server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()  # type: ignore[operator]
        self._thread.join(30)


@pytest.fixture(params=CORPORA, ids=[c.package for c in CORPORA])
def corpus(request: pytest.FixtureRequest) -> Iterator[Corpus]:
    c: Corpus = request.param
    if not (c.root / c.start).is_file():
        pytest.skip(f"CORPUS MISSING: {c.root / c.start} not found; install the Debian package {c.package} "
                    f"(apt-get install --no-install-recommends {c.package}) to run the {c.generator} corpus")
    yield c


def test_the_default_config_fetches_every_page_of_a_real_site(tmp_path: Path, corpus: Corpus) -> None:
    pages = oracle(corpus.root, corpus.start)
    with StaticServer(corpus.root) as server:
        origin = f"http://127.0.0.1:{server.port}"
        data = tmp_path / "data"
        cfg = {"seeds": [f"{origin}/{corpus.start}"], "politeness": {"delay": 0}, "storage": {"data_dir": str(data)},
               "output": {"progress": "off"}}
        crawl = CrawlRun(write_config(tmp_path / "crawl.yaml", cfg), tmp_path, "corpus")
        started = time.monotonic()
        try:
            code = crawl.wait(RUN_TIMEOUT)
        finally:
            crawl.kill_group()
        elapsed = time.monotonic() - started
    assert code == 0, crawl.output()
    assert_group_gone(crawl.pgid)
    records = read_crawl_log(data / "crawl.jsonl")[0]
    fetched = {unquote(urlsplit(r["url"]).path).lstrip("/") for r in records
               if r.get("url", "").startswith(origin) and r.get("http_status") == 200}
    requests = Counter(unquote(urlsplit(r["url"]).path).lstrip("/") for r in records
                       if r.get("url", "").startswith(origin) and r.get("http_status") is not None)
    other = sum(n for path, n in requests.items() if path not in pages and path != "robots.txt")
    summary = read_summary(data)
    suspected = sum(row["urls"] for row in summary.get("suspected") or [])
    missed = sorted(pages - fetched)
    print(f"| {corpus.name} ({corpus.generator}, {corpus.package}) | {len(pages):,} | {len(missed)} | "
          f"{other:,} | {suspected:,} | {elapsed:.1f} s | outcomes {summary.get('reasons')}")
    assert missed == [], f"{len(missed)} of {len(pages)} pages never fetched, e.g. {missed[:10]}\n{crawl.output()}"
