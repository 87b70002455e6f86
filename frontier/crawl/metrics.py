"""Prometheus metrics of a running crawl, served by the frontier process (`output.metrics: "127.0.0.1:9410"`).

    server = MetricsServer.start("127.0.0.1:9410", restarts=2)   # binds at once: StorageError if it cannot
    server.answer(service.stats)      # the frontier loop, once a turn: hands stats to a scrape that waits
    server.close()

Nothing is updated per page: a scrape reads the crawl's own counters at that moment. The HTTP server runs
on prometheus_client's thread, but the crawl state (LMDB, a Redis connection, the Bloom filter's growth)
belongs to the frontier loop's thread, so a scrape does not read it itself: it leaves a request that the
loop answers with `FrontierService.stats()` at its next turn (a turn lasts at most 0.2 s while idle), and
waits up to ANSWER_TIMEOUT. A scrape the loop cannot answer in time (a long commit, the final snapshot)
gets the last stats answered; one before the loop's first turn gets, at once, only the restart count and
the process's own metrics.

The families (crawl-wide counts come from the crawl state and survive restarts; "this process" ones
start at 0 in each frontier process, which Prometheus' rate() reads as a counter reset):

    frontier_pages_fetched_total            pages with an HTTP response, whole crawl (Redis: every instance)
    frontier_fetch_attempts_total           page results and leases that ended without one, whole crawl
    frontier_outcomes_total{outcome}        this process's outcomes: ok, redirect, http_404, robots_disallowed,
                                            lease_expired, link_* (links left out), robots_* ...
    frontier_leases_expired_total           this process's leases that ran out (a dead or stuck worker)
    frontier_queued_urls                    URLs queued (leased ones included), whole crawl
    frontier_in_flight                      leases out now (Redis: every instance's)
    frontier_in_flight_slots                workers.processes x workers.concurrency
    frontier_hosts, frontier_unreachable_hosts
    frontier_seen_urls                      distinct URLs in the seen-set
    frontier_seen_checked_total, ..._new_total, ..._lru_hits_total, ..._bloom_new_total (the Bloom filter
      said new), ..._log_hits_total (a Bloom "maybe" the log confirmed), ..._false_positives_caught_total,
      ..._trusted_maybe_total (probabilistic mode), ..._worker_known_total (dropped by a worker's filter),
      ..._batch_repeats_total: the seen-test's tiers, this process's checks (LMDB backend only: a Redis
      crawl's seen-test runs server-side, inside each commit)
    frontier_bloom_fill_ratio, frontier_bloom_estimated_false_positive_rate, frontier_bloom_bytes,
      frontier_bloom_generations: the shared Bloom filter now (LMDB backend only)
    frontier_worker_restarts_total          times the supervisor restarted the crawl processes in this run
    process_*                               prometheus_client's figures of the frontier process (RSS, CPU)

prometheus_client is imported only by `MetricsServer.start` (start-up time): importing this module is cheap,
and frontier.config uses `split_address` from it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from typing import Any

from frontier.errors import ConfigError, FrontierError, StorageError

__all__ = ["ANSWER_TIMEOUT", "MetricsServer", "StatsCollector", "split_address"]

ANSWER_TIMEOUT = 5.0  # seconds a scrape waits for the frontier loop (Prometheus' default scrape timeout is 10 s)
PREFIX = "frontier"

# stats key -> (family name, help); counters get "_total" from prometheus_client
_COUNTERS = {
    "fetched": ("pages_fetched", "Pages fetched with an HTTP response, the whole crawl."),
    "attempts": ("fetch_attempts", "Page results and leases that ended without one, the whole crawl."),
}
_GAUGES = {
    "queued": ("queued_urls", "URLs queued, leased ones included, the whole crawl."),
    "in_flight": ("in_flight", "Leases out now."),
    "slots": ("in_flight_slots", "Fetches the workers can run at once (processes x concurrency)."),
    "hosts": ("hosts", "Hosts known to the crawl."),
    "unreachable_hosts": ("unreachable_hosts", "Hosts held back in this run by network errors."),
}
_SEEN_COUNTERS = {
    "checked": ("checked", "URLs this process checked against the seen-set."),
    "new": ("new", "Of them, new to the crawl."),
    "lru_hits": ("lru_hits", "Answered by the LRU of recent fingerprints."),
    "bloom_negative": ("bloom_new", "Answered new by the Bloom filter."),
    "log_confirmed": ("log_hits", "Bloom 'maybe' confirmed as seen by the fingerprint log."),
    "false_positives_caught": ("false_positives_caught", "Bloom 'maybe' the fingerprint log did not hold."),
    "trusted_maybe": ("trusted_maybe", "Bloom 'maybe' trusted without the log (probabilistic mode)."),
    "worker_known": ("worker_known", "Links a worker dropped because the shared Bloom filter held them."),
    "batch_repeats": ("batch_repeats", "Repeats within one batch."),
}
_BLOOM_GAUGES = {
    "fill_ratio": ("bloom_fill_ratio", "Fill ratio of the Bloom filter's newest generation."),
    "estimated_false_positive_rate": ("bloom_estimated_false_positive_rate",
                                      "Estimated false-positive rate for a new URL now."),
    "bloom_bytes": ("bloom_bytes", "Bytes of the Bloom filter's bits."),
    "bloom_generations": ("bloom_generations", "Generations of the Bloom filter (it grows past its capacity)."),
}


def split_address(text: Any) -> tuple[str, int]:
    """(host, port) of "host:port" ("[::1]:9410" for IPv6); ConfigError naming output.metrics otherwise."""
    host, sep, port = text.rpartition(":") if isinstance(text, str) else ("", "", "")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ConfigError(f'expected "host:port" (e.g. "127.0.0.1:9410") or null, got {text!r}', key="output.metrics")
    return host, int(port)


class StatsCollector:
    """A prometheus_client collector of one crawl's stats dict (FrontierService.stats()), read by `read()` at
    scrape time. `restarts`: the supervisor's count for this run."""

    def __init__(self, read: Callable[[], Mapping[str, Any] | None], *, restarts: int = 0) -> None:
        self.read = read
        self.restarts = restarts

    def describe(self) -> list[Any]:
        return []  # unchecked collector: the families depend on the backend and on what has happened

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        def counter(name: str, doc: str, value: float) -> Any:
            return CounterMetricFamily(f"{PREFIX}_{name}", doc, value=value)

        def gauge(name: str, doc: str, value: float) -> Any:
            return GaugeMetricFamily(f"{PREFIX}_{name}", doc, value=value)

        yield counter("worker_restarts", "Times the supervisor restarted the crawl processes in this run.",
                      self.restarts)
        stats = self.read()
        if stats is None:
            return
        for key, (name, doc) in _COUNTERS.items():
            yield counter(name, doc, stats[key])
        for key, (name, doc) in _GAUGES.items():
            if key in stats:
                yield gauge(name, doc, stats[key])
        reasons = stats.get("reasons", {})
        outcomes = CounterMetricFamily(f"{PREFIX}_outcomes", "Outcomes in this frontier process, by reason.",
                                       labels=["outcome"])
        for reason, n in sorted(reasons.items()):
            outcomes.add_metric([reason], n)
        yield outcomes
        yield counter("leases_expired", "Leases of this process that ran out (a dead or stuck worker).",
                      reasons.get("lease_expired", 0))
        seen = stats.get("seen", {})
        if "urls" in seen:
            yield gauge("seen_urls", "Distinct URLs in the seen-set.", seen["urls"])
        if seen.get("backend") == "redis":  # its seen-test runs server-side, inside each commit: no tiers here
            return
        for key, (name, doc) in _SEEN_COUNTERS.items():
            if key in seen:
                yield counter(f"seen_{name}", doc, seen[key])
        for key, (name, doc) in _BLOOM_GAUGES.items():
            if key in seen:
                yield gauge(name, doc, seen[key])


class MetricsServer:
    """The HTTP endpoint and the hand-over between a scrape (the server's thread) and the frontier loop."""

    def __init__(self, *, restarts: int = 0) -> None:
        self.collector = StatsCollector(self._request, restarts=restarts)
        self.server: Any = None
        self.thread: threading.Thread | None = None
        self._requests: queue.SimpleQueue[Future[Mapping[str, Any] | None]] = queue.SimpleQueue()
        self._last: Mapping[str, Any] | None = None
        self._live = False  # the loop answers (from its first turn on)
        self._closed = False

    @classmethod
    def start(cls, address: str, *, restarts: int = 0) -> "MetricsServer":
        """Bind `address` ("host:port") and serve on a daemon thread; StorageError if it cannot be bound."""
        from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server

        host, port = split_address(address)
        metrics = cls(restarts=restarts)
        registry = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=registry)
        registry.register(metrics.collector)
        try:
            metrics.server, metrics.thread = start_http_server(port, addr=host, registry=registry)
        except OSError as e:
            raise StorageError(f"output.metrics: cannot serve metrics on {address}: {e.strerror or e}") from None
        return metrics

    @property
    def address(self) -> tuple[str, int]:
        return self.server.server_address[:2]

    def _request(self) -> Mapping[str, Any] | None:
        """On the server's thread: the loop's answer, else the last one (None before the first)."""
        if self._live and not self._closed:
            future: Future[Mapping[str, Any] | None] = Future()
            self._requests.put(future)
            try:
                return future.result(ANSWER_TIMEOUT)
            except TimeoutError:  # the loop is busy (a long commit, the final snapshot) or gone
                future.cancel()
        return self._last

    def answer(self, stats: Callable[[], Mapping[str, Any]]) -> None:
        """On the frontier loop's thread, once a turn: answer every waiting scrape with one `stats()` call."""
        self._live = True
        if self._requests.empty():
            return
        try:
            value: Mapping[str, Any] | None = stats()
        except FrontierError:  # a Redis outage: the loop's own next step meets it and deals with it
            value = None
        else:
            self._last = value
        while not self._requests.empty():
            future = self._requests.get_nowait()
            if future.set_running_or_notify_cancel():
                future.set_result(self._last if value is None else value)

    def close(self) -> None:
        """Stop serving (idempotent); a scrape under way gets the last stats."""
        if self._closed:
            return
        self._closed = True
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        if self.thread is not None:
            self.thread.join(2.0)
