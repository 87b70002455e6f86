"""The crawl log's records: one per attempt (a page result, or a lease that ended without one), and one per
URL skipped without a fetch. Sent to the `on_event` callback (the crawl log writer of frontier.crawl.process).

`simhash`: the 64-bit simhash of an HTML page's text as 16 hex digits (frontier.crawl.traps.sketch; null without
one): pages a few bits apart have nearly the same text, the de-dup of content that URLs cannot give. `address`: the
IP address the fetch connected to (null without a response; network.resolve's when it names the host)."""

from __future__ import annotations

from collections.abc import Callable

from frontier.crawl.messages import FetchJob, FetchResult, Status

Event = dict[str, object]
OnEvent = Callable[[Event], None]
SOFT_404_PROBE = "soft_404_probe"  # the outcome of a host's soft-404 probe: observed, its links not followed


def attempt_record(job: FetchJob, status: Status, reason: str | None, *, retry: bool, fetched_at: float,
                   **result: object) -> Event:
    """`result` holds what a fetch result adds; without it the record is that of an attempt that brought
    no result (a lease that expired or was abandoned)."""
    record: Event = {
        "url": job.url, "status": status.value, "http_status": None,
        "reason": reason, "retry": retry, "attempt": job.attempt, "depth": job.depth,
        "content_type": None, "bytes": 0, "elapsed": 0.0, "links": 0, "new_links": 0,
        "redirect_to": None, "fetched_at": fetched_at, "worker": -1, "simhash": None, "address": None,
    }
    if job.sitemap:  # the crawler's own request, not a page of the site
        record["sitemap"] = job.sitemap
    record.update(result)
    return record


def result_record(result: FetchResult, *, retry: bool, new_links: int) -> Event:
    return attempt_record(result.job, result.status, result.reason, retry=retry, fetched_at=result.fetched_at,
                          http_status=result.http_status, content_type=result.content_type, bytes=result.bytes,
                          elapsed=round(result.elapsed, 4), links=len(result.outlinks), new_links=new_links,
                          redirect_to=result.redirect_to, worker=result.worker, address=result.address,
                          simhash=None if result.sketch is None else f"{result.sketch.simhash:016x}")


def skip_record(url: str, depth: int, reason: str, now: float) -> Event:
    return {"url": url, "status": "skip", "reason": reason, "depth": depth, "fetched_at": now}
