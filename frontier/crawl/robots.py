"""robots.txt in the scheduler: parsed rules per host, the host's delay, and what a robots result does.

The crawl state stores each host's robots.txt text and its delay (shared by every frontier instance);
this process parses the rules it needs once per host and keeps them. RFC 9309: a 4xx allows all (the
worker reports an empty body), a 5xx or network error is retried (1 + max_retries attempts), then a
network error holds the host back for this run (its URLs stay queued) and anything else disallows all.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from frontier.config import PolitenessConfig
from frontier.crawl.messages import NETWORK_ERRORS, FetchResult, Status
from frontier.crawl.retry import backoff, pause_until
from frontier.state.base import Lease, RobotsAck, RobotsOutcome
from frontier.url.robots import RobotsRules


class RobotsCache:
    """Parsed rules per host. `stored(host)` reads a host's robots.txt text from the crawl state (None:
    none stored, so the host's gate was opened by a give-up: disallow all)."""

    def __init__(self, politeness: PolitenessConfig, stored: Callable[[str], str | None]) -> None:
        self.politeness = politeness
        self._stored = stored
        self._rules: dict[str, RobotsRules] = {}

    def loaded(self, host: str, text: str) -> float:
        """Keep the rules of a stored robots.txt; returns the host's delay under them."""
        self._rules[host] = RobotsRules.parse(text, self.politeness.user_agent)
        return self.delay(host)

    def delay(self, host: str) -> float:
        """The configured delay, or robots.txt Crawl-delay (capped at max_crawl_delay) when larger."""
        delay = self.politeness.delay
        rules = self._rules.get(host)
        if rules is not None and rules.crawl_delay:
            delay = max(delay, min(rules.crawl_delay, self.politeness.max_crawl_delay))
        return delay

    def allows(self, host: str, url: str) -> bool:
        rules = self._rules.get(host)
        if rules is None:
            text = self._stored(host)
            rules = RobotsRules.disallow_all() if text is None else RobotsRules.parse(text, self.politeness.user_agent)
            self._rules[host] = rules
        return rules.allows(url)

    def ack(self, lease: Lease, result: FetchResult, now: float, max_retries: int, reasons: Counter[str]) -> RobotsAck:
        """The ack of a robots.txt result (`lease.attempt`: the host's earlier failures); counts its reason."""
        host, pause, address = lease.host, pause_until(result, now), result.address or ""
        if result.status is Status.OK:
            text = result.robots_txt or ""
            self._rules[host] = RobotsRules.parse(text, self.politeness.user_agent)
            reasons["robots_fetched"] += 1
            return RobotsAck(key=lease.key, outcome=RobotsOutcome.OK, delay=self.delay(host), text=text,
                             fetched_at=result.fetched_at or time.time(), pause_until=pause, address=address)
        if lease.attempt + 1 <= max_retries:
            return RobotsAck(key=lease.key, outcome=RobotsOutcome.RETRY, delay=self.delay(host),
                             not_before=now + backoff(result), pause_until=pause, address=address)
        if result.reason in NETWORK_ERRORS:  # its URLs stay queued for a rerun, none is skipped
            reasons["host_unreachable"] += 1
            return RobotsAck(key=lease.key, outcome=RobotsOutcome.UNREACHABLE, delay=self.delay(host),
                             reason=result.reason or "", pause_until=pause, address=address)
        self._rules[host] = RobotsRules.disallow_all()
        reasons["robots_unreachable"] += 1
        return RobotsAck(key=lease.key, outcome=RobotsOutcome.DISALLOW, delay=self.delay(host), pause_until=pause,
                         address=address)
