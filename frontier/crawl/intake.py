"""What may enter the queue: seeds, and each page's outlinks and redirect target, as canonical in-scope
`Link`s with their depth. Refusals are counted in `reasons` ("seed_<why>", "link_<why>", "redirect_<why>").
The trap detector refuses nothing: a link or redirect target of a suspected URL pattern (depth >= 2) is
proposed for its host's low queue (`Link.low`, counted "link_trap_pattern" / "redirect_trap_pattern"), and so
are the links of a page the caller judged a soft 404 (`add_result(..., low=True)`) and those of a page with a
huge fan-out (traps.FAN_OUT links or more, counted "link_fan_out"), so the rest of the site comes first.

With a trap detector doing soft-404 detection, the first URL of a host this process proposes brings the
host's probe (`TrapDetector.probe_url`, depth 1) just before it, so it is the host's first page in the FIFO.
The probe goes through the seen-test like any link: queued once per crawl, whatever the restarts.

Within one batch a URL is proposed once, by the first seed or result that links it (its depth is that
one's: with concurrent fetching not always the shortest path, like Scrapy's DEPTH_LIMIT).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from frontier.crawl import sitemaps
from frontier.crawl.messages import FetchResult, Status
from frontier.crawl.traps import FAN_OUT, TrapDetector
from frontier.errors import InvalidURL
from frontier.state.base import Link
from frontier.url.canonical import CanonicalRules, canonicalize
from frontier.url.scope import Scope


class LinkBatch:
    """The candidate links of one commit, first proposal first."""

    def __init__(self, scope: Scope, reasons: Counter[str], *, max_depth: int | None = None,
                 max_redirects: int = 0, traps: TrapDetector | None = None, probed: set[str] | None = None) -> None:
        """`probed`: the origins ("scheme://host[:port]") whose probe was proposed already (kept by the caller
        across batches)."""
        self.scope = scope
        self.reasons = reasons
        self.max_depth = max_depth
        self.max_redirects = max_redirects
        self.traps = traps
        self._probes = traps is not None and traps.soft_404
        self._probed = set() if probed is None else probed
        self._links: dict[str, Link] = {}

    def __len__(self) -> int:
        return len(self._links)

    def links(self) -> list[Link]:
        return list(self._links.values())

    def _propose(self, url: str, depth: int, redirects: int = 0, payload: bytes | None = None) -> None:
        if url not in self._links:
            self._links[url] = Link(url, depth, redirects, payload)

    def _check(self, url: str) -> str | None:
        """Scope; a URL that passes brings its host's probe when one is due."""
        reason = self.scope.check(url)
        if reason is None and self._probes:
            self._probe(url)
        return reason

    def _low(self, url: str, depth: int, kind: str) -> bool:
        """Is the URL's pattern suspected (counted "<kind>_trap_pattern")?"""
        traps = self.traps
        if traps is None or traps.check(url, depth) is None:
            return False
        self.reasons[f"{kind}_trap_pattern"] += 1
        return True

    def _probe(self, url: str) -> None:
        origin = url[: url.find("/", url.find("://") + 3)]
        if origin in self._probed:
            return
        self._probed.add(origin)
        traps = self.traps
        if traps is not None and traps.needs_probe(url):
            probe = traps.probe_url(url)
            if self.scope.check(probe) is None:
                self._propose(probe, 1)  # depth 1: never taken for a seed (a seed that fails is held)

    def add_sitemaps(self, urls: Sequence[str], level: int, rules: CanonicalRules | None = None,
                     base: str | None = None) -> None:
        """Sitemaps of nesting `level` (frontier.crawl.sitemaps), scope-checked like links, at depth 1
        (refusals counted "sitemap_<why>"); canonicalised against `base` with `rules` unless `rules` is
        None (canonical already)."""
        if level > sitemaps.MAX_LEVEL:
            self.reasons["sitemap_too_deep"] += len(urls)
            return
        if self.max_depth is not None and sitemaps.SITEMAP_DEPTH > self.max_depth:
            self.reasons["sitemap_max_depth"] += len(urls)
            return
        for url in urls:
            try:
                canon = url if rules is None else canonicalize(url, base=base, rules=rules)
            except InvalidURL:
                self.reasons["sitemap_invalid_url"] += 1
                continue
            reason = self.scope.check(canon)
            if reason:
                self.reasons[f"sitemap_{reason}"] += 1
            else:
                self._propose(canon, sitemaps.SITEMAP_DEPTH, payload=sitemaps.payload(level))

    def add_seeds(self, urls: Iterable[str], rules: CanonicalRules) -> None:
        """Canonicalise and scope-check seeds (depth 0)."""
        for url in urls:
            try:
                canon = canonicalize(url, rules=rules)
            except InvalidURL:
                self.reasons["invalid_seed"] += 1
                continue
            reason = self._check(canon)
            if reason:
                self.reasons[f"seed_{reason}"] += 1
                continue
            self._propose(canon, 0)

    def add_result(self, result: FetchResult, *, low: bool = False, payload: bytes | None = None,
                   priority: float = 0.0) -> None:
        """A page's redirect target (same depth, one more redirect) and outlinks (depth + 1). A sitemap's
        redirect target stays a sitemap, its URLs keep its depth (1), an index's sitemaps are one level
        deeper. `low`: every new one goes to its host's low queue (a soft 404's). `payload` and `priority`: the
        redirecting entry's (its lease's): the target is the same page, so it keeps the priority and a sitemap's
        first revisit interval (<changefreq> / <lastmod>, `sitemaps.first_payload`)."""
        job = result.job
        if result.redirect_to:
            reason = self._check(result.redirect_to)
            if job.redirects + 1 > self.max_redirects:
                reason = "too_many_redirects"
            if reason:
                self.reasons[f"redirect_{reason}"] += 1
            elif result.redirect_to not in self._links:
                carried = sitemaps.payload(job.sitemap) if job.sitemap else (
                    payload if sitemaps.first_interval(payload) is not None else None)
                self._links[result.redirect_to] = Link(
                    result.redirect_to, job.depth, job.redirects + 1, carried,
                    low=low or self._low(result.redirect_to, job.depth, "redirect"), priority=priority)
        if result.sitemaps and result.status is Status.OK:
            self.add_sitemaps(result.sitemaps, job.sitemap + 1)
        if result.bad_hints:
            self.reasons["sitemap_bad_hint"] += result.bad_hints
        if result.status is not Status.OK or not result.outlinks:
            return
        depth = job.depth if job.sitemap else job.depth + 1
        if self.max_depth is not None and depth > self.max_depth:
            self.reasons["link_max_depth"] += len(result.outlinks)
            return
        check, links = self.scope.check if self.traps is None else self._check, self._links
        if self.traps is not None and not low and depth >= 2 and len(result.outlinks) >= FAN_OUT:
            low = True  # a huge fan-out: its links wait behind the rest of the site
            self.reasons["link_fan_out"] += len(result.outlinks)
        suspects = self.traps is not None and not low and depth >= 2
        firsts = result.first_intervals if job.sitemap else None
        for i, url in enumerate(result.outlinks):
            if url in links:  # proposed by an earlier page of the batch (a menu link): it passed then
                continue
            reason = check(url)
            if reason:
                self.reasons[f"link_{reason}"] += 1
            else:
                first = firsts[i] if firsts is not None else None
                links[url] = Link(url, depth, payload=None if first is None else sitemaps.first_payload(first),
                                  low=low or (suspects and self._low(url, depth, "link")))
