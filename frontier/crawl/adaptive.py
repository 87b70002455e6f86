"""Adaptive politeness (politeness.adaptive): a host waits after each result in proportion to how slowly its
server answered, so a struggling server gets fetched less often.

The pause is delay_factor x the server's latency (time to headers; the whole attempt without a response), at
least politeness.delay and at most politeness.max_delay. It travels with the result's ack as `pause_until`, so
every backend applies it unchanged (with robots.txt Crawl-delay, if larger, the state's own rule).
"""

from __future__ import annotations

from frontier.config import PolitenessConfig
from frontier.crawl.messages import FetchResult


def adaptive_pause_until(politeness: PolitenessConfig, result: FetchResult, now: float) -> float:
    """When the result's host may be fetched again under adaptive politeness (wall clock, seconds)."""
    latency = result.latency if result.latency is not None else result.elapsed
    return now + min(max(latency * politeness.delay_factor, politeness.delay), politeness.max_delay)
