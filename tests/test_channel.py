"""workers.channel.ResultSender: results cross to the frontier in batches, but a worker with nothing else
in flight sends at once (a chain of single links would otherwise wait the flush delay at every hop)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue

from frontier.crawl.messages import FetchJob, FetchResult, Status
from workers.channel import RESULT_FLUSH_SECONDS, ResultSender


def result(n: int) -> FetchResult:
    return FetchResult(job=FetchJob(url=f"http://a.example/{n}", key=b"k%d" % n, depth=1), status=Status.OK,
                       worker=0, fetched_at=0.0)


def test_results_wait_for_a_batch_unless_the_worker_is_idle() -> None:
    async def run() -> tuple[int, int, int]:
        results: queue.Queue[list[FetchResult]] = queue.Queue()
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            sender = ResultSender(results, pool)
            await sender.send(result(1))  # other fetches in flight: held for the batch
            held = results.qsize()
            await sender.send(result(2), idle=True)  # the last one in flight: sent now, with the held one
            idle = results.qsize()
            await sender.send(result(3))
            await asyncio.sleep(RESULT_FLUSH_SECONDS * 5)  # a lone result goes after the flush delay
            return held, idle, results.qsize()

    held, idle, later = asyncio.run(run())
    assert (held, idle, later) == (0, 1, 2)
