"""The worker's ends of the frontier's queues (frontier.crawl.process.Channels), between them and its event loop.

Jobs in: a thread (`read_jobs`) reads batches of jobs from the multiprocessing queue, never holding the
queue's read lock while it waits, and hands them to the loop's inbox, taking no more than the worker's
idle fetch tasks can start. Results out: `ResultSender` batches the fetch tasks' results into one queue
message each, and blocks in a thread (backpressure) when the bounded results queue is full.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import multiprocessing.connection
import queue
import threading
import time
from typing import Any

from frontier.crawl.messages import FetchJob, FetchResult, JobBatch, ResultBatch

log = logging.getLogger(__name__)

_POLL_SECONDS = 0.5  # how often the job reader looks up from a blocking get (stop flag)
_LOCK_BACKOFF = 0.001  # a job was waiting but another reader got the queue's lock first
RESULTS_PER_MESSAGE = 64  # a batch of results is sent when this many are waiting,
RESULT_FLUSH_SECONDS = 0.002  # or this long after its first result


def _wait_for_job(jobs: Any, timeout: float) -> bool:
    """Wait until the job queue may hold a message, without taking its read lock; True if it may.

    `multiprocessing.Queue.get(timeout=...)` holds the queue's read lock while it waits, so one stopped
    worker (SIGSTOP, a debugger, a frozen cgroup) waiting there would starve every other worker, and
    the frontier's leases of the jobs behind it would expire and be fetched twice.
    """
    reader = getattr(jobs, "_reader", None)  # the Queue's pipe end (not public); absent on a queue.Queue
    if reader is None:
        time.sleep(min(timeout, 0.005))
        return True
    return bool(multiprocessing.connection.wait([reader], timeout))


def _acquire(slots: threading.Semaphore, n: int, stop: threading.Event) -> bool:
    """Take `n` job slots, looking up at the stop flag every _POLL_SECONDS; False if it was set first."""
    for _ in range(n):
        while not slots.acquire(timeout=_POLL_SECONDS):
            if stop.is_set():
                return False
    return True


def _next_batch(jobs: Any, stop: threading.Event) -> JobBatch | None:
    """The next message of the job queue: a batch of jobs, or None (the end-of-crawl sentinel, or a stop)."""
    ready = False
    while True:
        try:
            return jobs.get_nowait()  # holds the queue's read lock only to read a waiting message
        except queue.Empty:
            if stop.is_set():
                return None
            if ready:
                time.sleep(_LOCK_BACKOFF)
            ready = _wait_for_job(jobs, _POLL_SECONDS)


def _put_all(inbox: asyncio.Queue[FetchJob | None], batch: JobBatch) -> None:
    for job in batch:
        inbox.put_nowait(job)


def read_jobs(jobs: Any, loop: asyncio.AbstractEventLoop, inbox: asyncio.Queue[FetchJob | None],
              slots: threading.Semaphore, tasks: int, stop: threading.Event) -> None:
    """Thread: reads batches of jobs from the mp queue and hands them to the loop with call_soon_threadsafe.

    `slots` bounds the jobs taken but not yet started (a fetch task releases one when it starts a job): one
    is taken before a batch is read, and one for each further job of the batch before the next read. So a
    busy worker holds at most one batch beyond its idle fetch tasks and leaves the rest of the shared queue
    to the other workers.
    """
    try:
        while _acquire(slots, 1, stop):
            batch = _next_batch(jobs, stop)
            if batch is None:
                break
            loop.call_soon_threadsafe(_put_all, inbox, batch)
            if not _acquire(slots, len(batch) - 1, stop):
                break
        for _ in range(tasks):  # one sentinel per fetch task; each finishes its fetch in flight first
            loop.call_soon_threadsafe(inbox.put_nowait, None)
    except (EOFError, OSError, ValueError):  # the queue was closed under us
        log.warning("worker: job queue closed, stopping")
        try:
            for _ in range(tasks):
                loop.call_soon_threadsafe(inbox.put_nowait, None)
        except RuntimeError:
            pass
    except RuntimeError:  # the loop is closed: the worker is going away
        pass


class ResultSender:
    """Sends a worker's results to the frontier in batches (one queue message each): when
    RESULTS_PER_MESSAGE are waiting, when the worker has nothing else in flight, or RESULT_FLUSH_SECONDS
    after the first of a batch, so a lone result is not held back longer than that. One put at a time: when the bounded results queue is full, the put
    blocks in `pool`'s thread and fetch tasks that fill the next batch wait for it (backpressure, as with
    one put per result). Results not yet sent when the worker dies are lost like those in the queue's
    buffer: their leases expire, or are abandoned when the supervisor restarts the crawl.
    """

    def __init__(self, results: Any, pool: concurrent.futures.Executor) -> None:
        self._results = results
        self._pool = pool
        self._batch: ResultBatch = []
        self._timer: asyncio.TimerHandle | None = None
        self._lock = asyncio.Lock()
        self._pending: set[asyncio.Task[None]] = set()

    async def send(self, result: FetchResult, *, idle: bool = False) -> None:
        """Queue `result` for the next batch. `idle`: the worker has nothing else in flight, so no other
        result can join the batch: send it now (a chain of single links, page after page, would otherwise
        wait RESULT_FLUSH_SECONDS at each hop)."""
        self._batch.append(result)
        if idle or len(self._batch) >= RESULTS_PER_MESSAGE:
            await self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(RESULT_FLUSH_SECONDS, self._flush_soon)

    def _flush_soon(self) -> None:
        self._timer = None
        task = asyncio.ensure_future(self.flush())
        self._pending.add(task)  # a reference, so the task is not collected before it runs
        task.add_done_callback(self._pending.discard)

    async def flush(self) -> None:
        """Send what is waiting."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        async with self._lock:
            batch, self._batch = self._batch, []
            if not batch:
                return
            try:  # an unbounded (or not full) queue takes it at once: no thread hop
                self._results.put_nowait(batch)
            except queue.Full:
                await asyncio.get_running_loop().run_in_executor(self._pool, self._results.put, batch)
