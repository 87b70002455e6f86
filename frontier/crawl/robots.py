"""robots.txt in the scheduler: parsed rules per host, the host's delay, and what a robots result does.

The crawl state stores each host's robots.txt text and its delay (shared by every frontier instance);
this process parses the rules it needs once per host and keeps them. RFC 9309: a 4xx allows all (the
worker reports an empty body), a 5xx or network error is retried (1 + max_retries attempts), then a
network error holds the host back for this run (its URLs stay queued) and anything else disallows all.

A Crawl-delay over politeness.max_crawl_delay follows politeness.long_crawl_delay: cap (the host waits
max_crawl_delay), obey (it waits the Crawl-delay) or skip (its URLs are refused at lease time under the reason
robots_crawl_delay instead of robots_disallowed). `long_delays` lists those hosts, as this process read them,
for summary.json and the end lines.
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
        self.long_delays: dict[str, float] = {}  # host -> its Crawl-delay, when over max_crawl_delay

    def _keep(self, host: str, rules: RobotsRules) -> RobotsRules:
        self._rules[host] = rules
        if rules.crawl_delay and rules.crawl_delay > self.politeness.max_crawl_delay:
            self.long_delays[host] = rules.crawl_delay
        else:
            self.long_delays.pop(host, None)
        return rules

    def loaded(self, host: str, text: str) -> float:
        """Keep the rules of a stored robots.txt; returns the host's delay under them."""
        self._keep(host, RobotsRules.parse(text, self.politeness.user_agent))
        return self.delay(host)

    def delay(self, host: str) -> float:
        """The configured delay, or robots.txt Crawl-delay when larger: as given with long_crawl_delay obey,
        else at most max_crawl_delay."""
        delay = self.politeness.delay
        rules = self._rules.get(host)
        if rules is not None and rules.crawl_delay:
            asked = rules.crawl_delay
            if self.politeness.long_crawl_delay != "obey":
                asked = min(asked, self.politeness.max_crawl_delay)
            delay = max(delay, asked)
        return delay

    def allows(self, host: str, url: str) -> bool:
        """Whether `url` may be fetched: its robots.txt allows it, and with long_crawl_delay skip, the host's
        Crawl-delay is not over max_crawl_delay (`refusals` tells the two apart)."""
        rules = self._rules.get(host)
        if rules is None:
            text = self._stored(host)
            rules = self._keep(host, RobotsRules.disallow_all() if text is None
                               else RobotsRules.parse(text, self.politeness.user_agent))
        if self.politeness.long_crawl_delay == "skip" and host in self.long_delays:
            return False
        return rules.allows(url)

    def refusals(self, leases: list[Lease]) -> dict[str, list[Lease]]:
        """Leases `allows` refused, by the reason each is counted under: robots_disallowed, or
        robots_crawl_delay (long_crawl_delay skip)."""
        skip = self.politeness.long_crawl_delay == "skip"
        out: dict[str, list[Lease]] = {}
        for lease in leases:
            reason = "robots_crawl_delay" if skip and lease.host in self.long_delays else "robots_disallowed"
            out.setdefault(reason, []).append(lease)
        return out

    def report(self) -> dict[str, object]:
        """summary.json's `long_crawl_delay`: the choice, the bound, and the hosts over it with their Crawl-delay."""
        p = self.politeness
        return {"policy": p.long_crawl_delay, "max_crawl_delay": p.max_crawl_delay,
                "hosts": dict(sorted(self.long_delays.items()))}

    def ack(self, lease: Lease, result: FetchResult, now: float, max_retries: int, reasons: Counter[str]) -> RobotsAck:
        """The ack of a robots.txt result (`lease.attempt`: the host's earlier failures); counts its reason."""
        host, pause, address = lease.host, pause_until(result, now), result.address or ""
        if result.status is Status.OK:
            text = result.robots_txt or ""
            self._keep(host, RobotsRules.parse(text, self.politeness.user_agent))
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
        self._keep(host, RobotsRules.disallow_all())
        reasons["robots_unreachable"] += 1
        return RobotsAck(key=lease.key, outcome=RobotsOutcome.DISALLOW, delay=self.delay(host), pause_until=pause,
                         address=address)


def long_delay_line(report: object, skipped: int, examples: int = 3) -> str | None:
    """One line on the hosts whose robots.txt Crawl-delay is over max_crawl_delay and what the crawl did with them
    (`report`: summary.json's `long_crawl_delay`; `skipped`: URLs counted robots_crawl_delay); None: no such host."""
    if not isinstance(report, dict) or not report.get("hosts"):
        return None
    hosts: dict[str, float] = report["hosts"]
    bound, policy = report.get("max_crawl_delay", 0.0), report.get("policy", "cap")
    named = ", ".join(f"{host} {delay:g} s" for host, delay in list(hosts.items())[:examples])
    more = f" and {len(hosts) - examples} more" if len(hosts) > examples else ""
    did = {"cap": f"fetched every {bound:g} s, not at their Crawl-delay",
           "obey": "fetched at their Crawl-delay",
           "skip": f"not fetched: {skipped} URL{'s' if skipped != 1 else ''} skipped (robots_crawl_delay)"}
    return (f"robots.txt Crawl-delay over politeness.max_crawl_delay {bound:g} s at {len(hosts)} "
            f"host{'s' if len(hosts) != 1 else ''} ({named}{more}); long_crawl_delay {policy}: "
            f"{did.get(policy, policy)}")
