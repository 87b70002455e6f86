"""When again: each fetched page's next due time, from whether it changed since its last fetch.

    schedule = RevisitSchedule.from_config(cfg.revisit)
    record, unchanged = schedule.next(previous, result, now)   # the Revisit the state stores with the page's ack

A page is unchanged when the server answers 304 to the conditional GET (If-None-Match / If-Modified-Since with
the validators of its last response, exactly as received), or when a 200's body digest equals the last one (a
server that sends no validators). Anything else with an HTTP response is a change (a first fetch included).

`adaptive` (revisit.adaptive), within [min_after, max_after]:
- "poisson" (the default): each URL's change rate is estimated from its visits and the changes they found (Cho &
  Garcia-Molina's estimator, `change_rate`), and its interval is the one that maximises the crawl's mean freshness
  for the fetches it spends (their Lagrange condition, `freshness_interval`). A page changing once per `after` is
  visited once per `after`; a slower one less often (about sqrt(after x its change interval)); a faster one not
  more often: fetching it more often buys little freshness (the optimum leaves one changing 4x faster than
  `after` at max_after, but when every visit finds a change the estimate is only a lower bound, so such a page
  stays near `after`). Why not Nutch's rule: it
  makes the interval track the change interval (proportional revisiting), which Cho & Garcia-Molina show loses to a
  fixed interval at the same number of fetches (`python -m frontier.bench revisit`: 0.633 vs 0.754).
- "nutch" (Nutch's AdaptiveFetchSchedule): unchanged -> interval x (1 + inc_rate), changed -> x (1 - dec_rate).
- "off": every interval is `after`.
The first interval is `after`, or, adaptive, the one a sitemap suggests (`first`: from <changefreq> or <lastmod>,
frontier.crawl.sitemaps.first_interval).

What the state keeps per fetched URL (frontier.state.crawlstore: the `revisit` and `due` databases): the URL,
its depth, the due time, interval, last change, last capture time, an 8-byte body digest, the two validators and
the visits / changes / seconds the rate estimate counts: a 72-byte value + the URL + the validators under a 16-byte
key, plus a 24-byte key of the due index (measured by `python -m frontier.bench revisit`: about 340 bytes per URL
in LMDB with 30-byte URLs).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from frontier.config import REVISIT_ADAPTIVE
from frontier.crawl.messages import FetchResult
from frontier.errors import ConfigError
from frontier.state.base import Revisit

NOT_MODIFIED = "not_modified"  # the outcome (reason) of a 304 answer to a conditional GET
UNCHANGED = "unchanged"  # a 200 whose body digest equals the last one
DIGEST_BYTES = 8  # of a page body's SHA-1, kept per URL to tell an unchanged 200
WINDOW = 32.0  # visits the rate estimate remembers: older ones fade out, so a page whose pace changes is followed
PRIOR_CHANGES = 0.5  # the estimate starts from one pseudo-visit of `after` seconds that found half a change
LAGRANGE = 1 - 2 / math.e  # x after: the freshness bought per fetch at the margin (a page changing once per after
#                            gets interval after)


def body_digest(body: bytes) -> bytes:
    """The digest a revisit record keeps of a page body read whole (the engine's workers and frontier.scrapy use
    this one function, so a crawl state's digests compare whichever fetched the page)."""
    return hashlib.sha1(body).digest()[:DIGEST_BYTES]


def change_rate(visits: float, changes: float, seconds: float) -> float:
    """Changes per second from `visits` that found `changes` over `seconds` in all: Cho & Garcia-Molina's
    estimator -log((n - X + 0.5) / (n + 0.5)) / mean interval, which, unlike X / seconds, does not saturate when
    most visits find a change."""
    return -math.log((visits - changes + 0.5) / (visits + 0.5)) * visits / seconds


def freshness_interval(rate: float, after: float) -> float:
    """The interval that maximises mean freshness per fetch spent for a page changing at `rate` (Poisson): the x =
    rate x interval where the marginal freshness of one more visit, 1 - (1 + x) e^-x, equals rate x LAGRANGE x
    after (it rises with x, so bisection). inf when no interval qualifies (a page changing too fast to be kept
    fresh) or the page never changed."""
    target = rate * LAGRANGE * after
    if target <= 0 or target >= 1:
        return math.inf
    lo, hi = 0.0, 50.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if 1 - (1 + mid) * math.exp(-mid) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2 / rate

@dataclass(frozen=True, slots=True, kw_only=True)
class RevisitSchedule:
    """The interval rules (RevisitConfig); `next` is a pure function of the last record and the result."""

    after: float
    adaptive: str = "poisson"  # one of frontier.config.REVISIT_ADAPTIVE
    min_after: float = 60.0
    max_after: float = 7_776_000.0
    inc_rate: float = 0.4
    dec_rate: float = 0.2

    def __post_init__(self) -> None:  # a library caller's True / False would silently mean poisson
        if self.adaptive not in REVISIT_ADAPTIVE:
            raise ConfigError(f"expected one of {', '.join(REVISIT_ADAPTIVE)}, got {self.adaptive!r}",
                              key="revisit.adaptive")

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
        visits = changes = seconds = 0.0
        if previous is None:
            interval = self.bounded(first) if first is not None and self.adaptive != "off" else self.after
        else:
            visits, changes = previous.visits + 1, previous.changes + (not unchanged)
            seconds = previous.seconds + max(now - (previous.due - previous.interval), 0.0)
            if visits > WINDOW:
                visits, changes, seconds = (v * WINDOW / visits for v in (visits, changes, seconds))
            interval = self._interval(previous, unchanged, visits, changes, seconds)
        job = result.job
        if not_modified and previous is not None:  # no body: the validators and digest of the last capture stand
            etag = result.etag or previous.etag
            modified = result.last_modified or previous.last_modified
            return Revisit(job.url, job.depth, now + interval, interval, previous.changed_at, previous.captured_at,
                           previous.digest, etag, modified, visits, changes, seconds), True
        digest = result.digest or b""
        changed_at = previous.changed_at if unchanged and previous is not None else now
        captured = previous.captured_at if unchanged and previous is not None else now
        return Revisit(job.url, job.depth, now + interval, interval, changed_at, captured, digest,
                       result.etag or "", result.last_modified or "", visits, changes, seconds), unchanged

    def _interval(self, previous: Revisit, unchanged: bool, visits: float, changes: float, seconds: float) -> float:
        if self.adaptive == "off":
            return self.after
        if self.adaptive == "nutch":
            return self.bounded(previous.interval * (1 + self.inc_rate if unchanged else 1 - self.dec_rate))
        rate = change_rate(visits + 1, changes + PRIOR_CHANGES, seconds + self.after)
        return self.bounded(freshness_interval(rate, self.after))
