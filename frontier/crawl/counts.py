"""This process's counts of its crawl (the crawl-wide ones are the state's, committed with what they count).

Each page attempt this process ends (a result, or a lease that ended without one) is counted once under its
outcome: a page of the site in `page_outcomes`, a request of the crawler's own (a host's soft-404 probe, a
sitemap) in `own_requests`, where robots.txt fetches are counted too (they are not attempts). So
sum(page_outcomes) + own_requests soft_404_probe + own_requests sitemap = attempts. `by_reason` holds every
outcome and every link refused (intake, traps, scoring), by reason.
"""

from __future__ import annotations

from collections import Counter

from frontier.crawl.events import SOFT_404_PROBE


class ProcessCounts:
    """What this process did, by kind (see the module docstring); `instance()` is the form stats report."""

    def __init__(self) -> None:
        self.by_reason: Counter[str] = Counter()  # every outcome and every refused link, by reason
        self.page_outcomes: Counter[str] = Counter()  # attempts at pages of the site, by outcome
        self.own_requests: Counter[str] = Counter()  # robots.txt, soft_404_probe, sitemap
        self.pages_fetched = 0  # pages of the site that got an HTTP response
        self.revisit_fetches: Counter[str] = Counter()  # revisits by result: not_modified, unchanged, changed

    def attempt(self, outcome: str, own: str | None) -> None:
        """One attempt ended under `outcome`: a page of the site's, or (`own`) a request of the crawler's own."""
        self.by_reason[outcome] += 1
        if own:
            self.own_requests[own] += 1
        else:
            self.page_outcomes[outcome] += 1

    @property
    def attempts(self) -> int:
        return self.page_outcomes.total() + self.own_requests[SOFT_404_PROBE] + self.own_requests["sitemap"]

    def instance(self, revisits: bool) -> dict[str, object]:
        """fetched, attempts, outcomes (page_outcomes), own (own_requests) and, with `revisits`, revisits."""
        out: dict[str, object] = {"fetched": self.pages_fetched, "attempts": self.attempts,
                                  "outcomes": dict(self.page_outcomes), "own": dict(self.own_requests)}
        if revisits:
            out["revisits"] = dict(self.revisit_fetches)
        return out
