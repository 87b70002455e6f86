"""When again: each fetched page's next due time, from whether it changed since its last fetch.

    schedule = RevisitSchedule.from_config(cfg.revisit)
    record, unchanged = schedule.next(previous, result, now)   # the Revisit the state stores with the page's ack

A page is unchanged when the server answers 304 to the conditional GET (If-None-Match / If-Modified-Since with
the validators of its last response, exactly as received), or when a 200's body digest equals the last one (a
server that sends no validators). Anything else with an HTTP response is a change (a first fetch included).

Adaptive (Nutch's AdaptiveFetchSchedule): unchanged -> interval x (1 + inc_rate), changed -> interval x
(1 - dec_rate), within [min_after, max_after]. Not adaptive: every interval is `after`. The first interval is
`after`, or, adaptive, the one a sitemap suggests (`first`: from <changefreq> or <lastmod>,
frontier.crawl.sitemaps.first_interval), within [min_after, max_after].

What the state keeps per fetched URL (frontier.state.crawlstore: the `revisit` and `due` databases): the URL,
its depth, the due time, interval, last change, last capture time, an 8-byte body digest and the two validators: a
48-byte value + the URL + the validators under a 16-byte key, plus a 24-byte key of the due index (measured by
`python -m frontier.bench revisit`: about 290 bytes per URL in LMDB with 30-byte URLs).
"""

from __future__ import annotations

from dataclasses import dataclass

from frontier.crawl.messages import FetchResult
from frontier.state.base import Revisit

NOT_MODIFIED = "not_modified"  # the outcome (reason) of a 304 answer to a conditional GET
UNCHANGED = "unchanged"  # a 200 whose body digest equals the last one

@dataclass(frozen=True, slots=True, kw_only=True)
class RevisitSchedule:
    """The interval rules (RevisitConfig); `next` is a pure function of the last record and the result."""

    after: float
    adaptive: bool = True
    min_after: float = 60.0
    max_after: float = 7_776_000.0
    inc_rate: float = 0.4
    dec_rate: float = 0.2

    @classmethod
    def from_config(cls, revisit: "object") -> RevisitSchedule | None:
        """None when revisits are off (revisit.after null)."""
        after = revisit.after  # type: ignore[attr-defined]
        if after is None:
            return None
        return cls(after=after, adaptive=revisit.adaptive, min_after=revisit.min_after,  # type: ignore[attr-defined]
                   max_after=revisit.max_after, inc_rate=revisit.inc_rate,  # type: ignore[attr-defined]
                   dec_rate=revisit.dec_rate)  # type: ignore[attr-defined]

    def bounded(self, interval: float) -> float:
        return min(max(interval, self.min_after), self.max_after)

    def next(self, previous: Revisit | None, result: FetchResult, now: float,
             first: float | None = None) -> tuple[Revisit, bool]:
        """The record after a page result with an HTTP response, and whether the page was unchanged. `first`:
        a sitemap's first interval for a page fetched for the first time."""
        not_modified = result.http_status == 304
        unchanged = previous is not None and (
            not_modified or (result.digest is not None and result.digest == previous.digest))
        if previous is None:
            interval = self.bounded(first) if first is not None and self.adaptive else self.after
        elif not self.adaptive:
            interval = self.after
        else:
            rate = 1 + self.inc_rate if unchanged else 1 - self.dec_rate
            interval = self.bounded(previous.interval * rate)
        job = result.job
        if not_modified and previous is not None:  # no body: the validators and digest of the last capture stand
            etag = result.etag or previous.etag
            modified = result.last_modified or previous.last_modified
            return Revisit(job.url, job.depth, now + interval, interval, previous.changed_at, previous.captured_at,
                           previous.digest, etag, modified), True
        digest = result.digest or b""
        changed_at = previous.changed_at if unchanged and previous is not None else now
        captured = previous.captured_at if unchanged and previous is not None else now
        return Revisit(job.url, job.depth, now + interval, interval, changed_at, captured, digest,
                       result.etag or "", result.last_modified or ""), unchanged
