"""Revisits under Scrapy: the frontier.scrapy Scheduler's second job, kept apart from its leases and acks.

Revisits (FRONTIER_REVISIT_AFTER seconds; None, the default: one pass), as the engine makes them
(frontier.crawl.revisit): a request that got a response is acked with its next schedule (`RevisitSchedule.next` of
its status, ETag, Last-Modified and body digest), stored in the same step as the ack, on LMDB and on Redis. Once
due, the crawl state queues its URL again by itself (the next lease does it), and a run ends when nothing is due
now; FRONTIER_REVISIT_CONTINUOUS keeps the spider open for pages due later. The state keeps a schedule per URL, not
the request: a URL queued again by its schedule comes back as a plain GET of its URL to the spider's default
callback (`parse`); a request scheduled again (start_urls are dont_filter) keeps its callback and meta. Requests
keyed by Scrapy's fingerprint (POST, ...) get no schedule. With FRONTIER_REVISIT_CONDITIONAL (the default) the
request of a URL with a stored schedule carries If-None-Match / If-Modified-Since (the values as received; a header
the spider set stays) and 304 in its meta `handle_httpstatus_list`: a 304 reaches the callback (`response.status ==
304`, no body: nothing changed since the last visit), where Scrapy's HttpErrorMiddleware would drop it and call the
errback with an HttpError, a failure it is not. A 304 is never a change. Stats: frontier/scheduler/revisit/
not_modified, /unchanged (a 200 with the last body's digest), /changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from frontier.crawl.messages import FetchJob, FetchResult, Status
from frontier.crawl.revisit import NOT_MODIFIED, UNCHANGED, RevisitSchedule, body_digest
from frontier.scrapy.settings import FINGERPRINT_DOMAIN

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response
    from scrapy.settings import BaseSettings
    from scrapy.spiders import Spider

    from frontier.state.base import CrawlState, Lease, Revisit

__all__ = ["ScrapyRevisits"]

NOT_MODIFIED_STATUS = 304
STATS = "frontier/scheduler/revisit/"  # + not_modified, unchanged or changed


def _header(response: Response, name: str) -> str | None:
    """A response header exactly as received (its bytes as the engine's workers keep them: UTF-8, surrogate
    escapes for the rest); None if absent."""
    value = response.headers.get(name)
    return None if value is None else value.decode("utf-8", "surrogateescape")


def _allowed_statuses(request: Request, spider: Spider | None, settings: BaseSettings | None) -> list[int] | None:
    """The statuses Scrapy's HttpErrorMiddleware lets through to the request's callback, as it decides it (the
    request's meta, else the spider's attribute, else HTTPERROR_ALLOWED_CODES); None: all of them."""
    meta = request.meta
    if meta.get("handle_httpstatus_all", False):
        return None
    if "handle_httpstatus_list" in meta:
        return list(meta["handle_httpstatus_list"])
    if settings is not None and settings.getbool("HTTPERROR_ALLOW_ALL"):
        return None
    default = settings.getlist("HTTPERROR_ALLOWED_CODES") if settings is not None else []
    return list(getattr(spider, "handle_httpstatus_list", default))


@dataclass(frozen=True, kw_only=True)
class ScrapyRevisits:
    """FRONTIER_REVISIT_* for the Scheduler (see the module docstring): `intervals` makes each next schedule;
    `conditional`: send the stored validators; `continuous`: keep the spider open for pages due later. The
    crawl state's policy must have `revisit` on (the Scheduler checks it)."""

    intervals: RevisitSchedule
    conditional: bool = True
    continuous: bool = False

    def prepare(self, request: Request, lease: Lease, spider: Spider | None, settings: BaseSettings | None) -> None:
        """The conditional GET of a revisit (a lease with a stored schedule): If-None-Match / If-Modified-Since
        with the stored validators, exactly as received, unless the spider set the header; and 304 let through
        to the callback (HttpErrorMiddleware would drop it, and call the errback with an HttpError)."""
        last = lease.revisit
        if not self.conditional or last is None:
            return
        sent = False
        for name, value in (("If-None-Match", last.etag), ("If-Modified-Since", last.last_modified)):
            if value and name not in request.headers:
                request.headers[name] = value.encode("utf-8", "surrogateescape")
                sent = True
        if not sent:
            return
        allowed = _allowed_statuses(request, spider, settings)
        if allowed is not None and NOT_MODIFIED_STATUS not in allowed:
            request.meta["handle_httpstatus_list"] = [*allowed, NOT_MODIFIED_STATUS]

    def schedule(self, lease: Lease, response: Response, now: float) -> tuple[Revisit | None, str | None]:
        """The leased request's next schedule from its response, as the engine makes it (RevisitSchedule.next): a
        304 is not modified, a 200 with the last body's digest unchanged; None for a request keyed by Scrapy's
        fingerprint (its URL is not one to fetch again). With it the stat to count (a revisit: not_modified,
        unchanged or changed), None on a first visit."""
        if lease.url.split("/", 3)[2].endswith(f".{FINGERPRINT_DOMAIN}"):
            return None, None
        status = response.status
        whole = status != NOT_MODIFIED_STATUS and not {"partial", "dataloss"} & set(response.flags)  # else no digest
        result = FetchResult(FetchJob(lease.url, lease.depth, lease.key), Status.OK, http_status=status,
                             etag=_header(response, "ETag"), last_modified=_header(response, "Last-Modified"),
                             digest=body_digest(response.body) if whole else None)
        revisit, unchanged = self.intervals.next(lease.revisit, result, now)
        if lease.revisit is None:
            return revisit, None
        how = NOT_MODIFIED if status == NOT_MODIFIED_STATUS else UNCHANGED if unchanged else "changed"
        return revisit, STATS + how

    def keeps_open(self, state: CrawlState, now: float) -> bool:
        """A page is due now (the next lease queues it), or, continuous, later (Scrapy's engine asks again at each
        heartbeat, every 5 seconds)."""
        due = state.next_due()  # type: ignore[attr-defined]  # both backends (the engine's Frontier.stats)
        return due is not None and (due <= now or self.continuous)
