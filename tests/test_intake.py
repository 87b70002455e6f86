"""LinkBatch (frontier.crawl.intake): what a page's outlinks propose, and what each refusal counts."""

from __future__ import annotations

from collections import Counter

from frontier.crawl.intake import LinkBatch
from frontier.crawl.messages import FetchJob, FetchResult, Status
from frontier.url.scope import Scope


class CountingScope(Scope):
    """A real Scope that remembers the URLs it was asked about."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)
        self.asked: list[str] = []

    def check(self, canonical_url: str) -> str | None:
        self.asked.append(canonical_url)
        return super().check(canonical_url)


def _page(url: str, outlinks: tuple[str, ...], depth: int = 1) -> FetchResult:
    return FetchResult(job=FetchJob(url=url, depth=depth, key=url.encode()), status=Status.OK, outlinks=outlinks)


def test_a_menu_link_is_checked_once_per_batch_and_refusals_count_per_page():
    scope = CountingScope(allowed_hosts=["a.org"])
    reasons: Counter[str] = Counter()
    batch = LinkBatch(scope, reasons)
    menu = ("http://a.org/", "http://a.org/docs", "http://b.org/out")
    batch.add_result(_page("http://a.org/1", menu + ("http://a.org/only1",)))
    batch.add_result(_page("http://a.org/2", menu + ("http://a.org/only2",), depth=3))
    assert [(link.url, link.depth) for link in batch.links()] == [
        ("http://a.org/", 2), ("http://a.org/docs", 2), ("http://a.org/only1", 2), ("http://a.org/only2", 4)]
    assert reasons == Counter({"link_out_of_scope": 2})  # once per page that links it, as before
    assert scope.asked.count("http://a.org/docs") == 1  # the second page's copy was proposed already
    assert scope.asked.count("http://b.org/out") == 2
