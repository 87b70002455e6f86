"""The priorities of a report's outlinks (frontier.crawl.ordering has the scorers that give them): each page's
values, the caller's (`FetchResult.priorities`) or its scorer's, merged over the batch's pages.

An additive scorer's values for one URL are summed over the batch (and kept within +-PRIORITY_LIMIT); any other
value replaces (the last page's wins). The new links get theirs in place; the URLs queued already get a
`Rescore` each, committed with the batch. A bad value, or a user scorer's exception, is counted
("bad_priority", "scorer_error") and costs its page's priorities, never the crawl.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from frontier.crawl.messages import FetchResult, Status
from frontier.crawl.ordering import ScoredPage, Scorer
from frontier.state.base import PRIORITY_LIMIT, Ack, Lease, Link, Outcome, Rescore, RobotsAck, check_priority


def merge_priorities(scorer: Scorer | None, accepted: Sequence[tuple[FetchResult, Lease]],
                     acks: Sequence[Ack | RobotsAck], links: list[Link], counts: Counter[str]) -> list[Rescore]:
    """Set the priorities of `links` (the batch's new links, in place) and return the re-scores of the URLs of
    the batch's done pages' outlinks (`accepted`, each with its `acks` entry); problems go to `counts`."""
    if scorer is None and all(result.priorities is None for result, _ in accepted):
        return []
    added: dict[str, float] = {}  # url -> the sum of an additive scorer's values
    replaced: dict[str, float] = {}  # url -> the last value that replaces (the caller's, or a plain scorer's)
    for (result, lease), ack in zip(accepted, acks):
        if lease.robots or ack.outcome is not Outcome.DONE or result.status is not Status.OK or not result.outlinks:
            continue
        given, into = result.priorities, replaced
        if given is None and scorer is not None:
            page = ScoredPage(url=lease.url, depth=lease.depth, priority=lease.priority, outlinks=result.outlinks,
                              counters=counts)
            try:
                given = scorer(page)
            except Exception:  # a user scorer's bug costs its page's priorities, not the crawl
                counts["scorer_error"] += 1
                continue
            if scorer.additive:
                into = added
        if given is None:
            continue
        if len(given) != len(result.outlinks):
            counts["bad_priority"] += 1
            continue
        if into is added:
            get = added.get
            try:
                for url, value in zip(result.outlinks, map(float, given)):
                    added[url] = get(url, 0.0) + value
            except (TypeError, ValueError):
                counts["bad_priority"] += 1
        else:
            for url, value in zip(result.outlinks, given):
                try:
                    replaced[url] = check_priority(value)
                except (TypeError, ValueError):
                    counts["bad_priority"] += 1
    if added:  # a scorer's sums, kept within the limit (a NaN or an infinity is not added)
        bad = [url for url, value in added.items() if not -PRIORITY_LIMIT <= value <= PRIORITY_LIMIT]
        for url in bad:
            value = added.pop(url)
            if value == value and value not in (float("inf"), float("-inf")):
                added[url] = max(min(value, PRIORITY_LIMIT), -PRIORITY_LIMIT)
            else:
                counts["bad_priority"] += 1
    for i, link in enumerate(links):
        url = link.url
        if url in replaced:
            links[i] = link._replace(priority=replaced[url])
        elif url in added:
            links[i] = link._replace(priority=added[url])
    return [*(Rescore(url, value) for url, value in replaced.items()),
            *(Rescore(url, value, add=True) for url, value in added.items() if url not in replaced)]
