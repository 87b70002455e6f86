"""What may enter the queue: seeds, and each page's outlinks and redirect target, as canonical in-scope
`Link`s with their depth. Refusals are counted in `reasons` ("seed_<why>", "link_<why>", "redirect_<why>").

Within one batch a URL is proposed once, by the first seed or result that links it (its depth is that
one's: with concurrent fetching not always the shortest path, like Scrapy's DEPTH_LIMIT).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from frontier.canonical import CanonicalRules, canonicalize
from frontier.errors import InvalidURL
from frontier.messages import FetchResult, Status
from frontier.scope import Scope
from frontier.state.base import Link


class LinkBatch:
    """The candidate links of one commit, first proposal first."""

    def __init__(self, scope: Scope, reasons: Counter[str], *, max_depth: int | None = None,
                 max_redirects: int = 0) -> None:
        self.scope = scope
        self.reasons = reasons
        self.max_depth = max_depth
        self.max_redirects = max_redirects
        self._links: dict[str, Link] = {}

    def __len__(self) -> int:
        return len(self._links)

    def links(self) -> list[Link]:
        return list(self._links.values())

    def _propose(self, url: str, depth: int, redirects: int = 0) -> None:
        if url not in self._links:
            self._links[url] = Link(url, depth, redirects)

    def add_seeds(self, urls: Iterable[str], rules: CanonicalRules) -> None:
        """Canonicalise and scope-check seeds (depth 0)."""
        for url in urls:
            try:
                canon = canonicalize(url, rules=rules)
            except InvalidURL:
                self.reasons["invalid_seed"] += 1
                continue
            reason = self.scope.check(canon)
            if reason:
                self.reasons[f"seed_{reason}"] += 1
                continue
            self._propose(canon, 0)

    def add_result(self, result: FetchResult) -> None:
        """A page's redirect target (same depth, one more redirect) and outlinks (depth + 1)."""
        job = result.job
        if result.redirect_to:
            reason = self.scope.check(result.redirect_to)
            if job.redirects + 1 > self.max_redirects:
                reason = "too_many_redirects"
            if reason:
                self.reasons[f"redirect_{reason}"] += 1
            else:
                self._propose(result.redirect_to, job.depth, job.redirects + 1)
        if result.status is not Status.OK or not result.outlinks:
            return
        if self.max_depth is not None and job.depth + 1 > self.max_depth:
            self.reasons["link_max_depth"] += len(result.outlinks)
            return
        check, links, depth = self.scope.check, self._links, job.depth + 1
        for url in result.outlinks:
            reason = check(url)
            if reason:
                self.reasons[f"link_{reason}"] += 1
            elif url not in links:
                links[url] = Link(url, depth)
