"""What a page result does to its queue entry: done, retried after a backoff, or held for a rerun.

A URL gets 1 + max_retries attempts. A seed (depth 0) whose last attempt fails with a network error
(messages.NETWORK_ERRORS) is held, not given up: it stays queued with its attempts reset, for a rerun.
A 429, a 503 or a connection reset without a Retry-After is the server asking to slow down: the ack says so
(`Ack.overload`) and the state backs off the host's whole queue group, not only the URL.
"""

from __future__ import annotations

import random

from frontier.crawl.messages import NETWORK_ERRORS, FetchResult, Status
from frontier.state.base import Ack, Outcome

MAX_BACKOFF = 300.0  # seconds; also the cap on a Retry-After
OVERLOAD_STATUSES = (429, 503)


def backoff(result: FetchResult) -> float:
    """Seconds before a failed fetch is tried again: its Retry-After, else 2^attempt with jitter."""
    if result.retry_after is not None:
        return min(max(result.retry_after, 0.0), MAX_BACKOFF)
    return min(2.0 ** result.job.attempt, MAX_BACKOFF) * (0.5 + random.random() / 2)


def pause_until(result: FetchResult, now: float) -> float:
    """When the host may be fetched again after a Retry-After (0.0: no pause)."""
    return now + min(result.retry_after, MAX_BACKOFF) if result.retry_after else 0.0


def overload(result: FetchResult) -> bool:
    """The server asked to slow down without saying for how long: 429 or 503 without Retry-After, or a reset."""
    if result.retry_after is not None:
        return False
    return result.http_status in OVERLOAD_STATUSES or result.reason == "connection_reset"


def outcome(result: FetchResult, max_retries: int) -> Outcome:
    if result.status is not Status.FAIL:
        return Outcome.DONE
    if result.job.attempt < max_retries:
        return Outcome.RETRY
    if result.job.depth == 0 and result.reason in NETWORK_ERRORS:
        return Outcome.HOLD
    return Outcome.DONE


def page_ack(result: FetchResult, now: float, max_retries: int) -> Ack:
    """The ack of a page result."""
    done = outcome(result, max_retries)
    return Ack(key=result.job.key, outcome=done, fetched=result.http_status is not None,
               not_before=now + backoff(result) if done is Outcome.RETRY else 0.0,
               reason=(result.reason or "") if done is Outcome.HOLD else "", pause_until=pause_until(result, now),
               overload=overload(result), address=result.address or "")
