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


def test_messages_pickle_as_their_field_values() -> None:
    """A job and a result cross a queue as their class and field values, rebuilt by __init__ (not by the
    dataclass __setstate__, a Python loop over dataclasses.fields(): half the pickling cost), every field intact."""
    import dataclasses
    import pickle
    import pickletools

    from frontier.crawl.traps import PageSketch

    job = FetchJob(url="http://a.test/p", depth=3, key=b"k1", attempt=2, redirects=1, robots=True, sitemap=2,
                   sketch=True, etag='"e"', last_modified="Sat, 01 Jan 2000 00:00:00 GMT", digest=b"d" * 8,
                   captured_at=12.5)
    result = FetchResult(job=job, status=Status.FAIL, reason="http_503", http_status=503, content_type="text/html",
                         bytes=10, elapsed=0.5, fetched_at=1.5, outlinks=("http://a.test/x",), skipped_links=4,
                         redirect_to="http://a.test/y", robots_txt="User-agent: *", retry_after=3.0, worker=1,
                         known_links=5, sketch=PageSketch(simhash=7, shingles=9), latency=0.25,
                         sitemaps=("http://a.test/s.xml",), first_intervals=(60.0, None), bad_hints=2,
                         priorities=(0.5,), etag='"f"', last_modified="x", digest=b"e" * 8, address="127.0.0.2")
    for field in dataclasses.fields(result):  # every field differs from its default
        assert getattr(result, field.name) != field.default, field.name
    data = pickle.dumps([result, job], pickle.HIGHEST_PROTOCOL)
    assert pickle.loads(data) == [result, job]
    assert "BUILD" not in {op.name for op, _arg, _pos in pickletools.genops(data)}  # no setstate: built by __init__
