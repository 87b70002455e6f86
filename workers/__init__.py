"""The fetch side of frontier: worker processes that fetch pages and extract their links.

    workers.links    extract_links(body, page_url, ...) -> LinkBatch   (pure; workers._linkscan, else lexbor)
    workers.charrefs unescape_attribute: HTML character references as the tokenizer decodes them in a value
    workers.fetcher  Fetcher (async, one aiohttp session) and run_worker (the spawned process's target)
    workers.body     a response body read and decoded with a cap, and sniffed (HTML? binary?)
    workers.channel  a worker's ends of the job and result queues, between them and its event loop
    workers.warc     WarcWriter: one gzip WARC file per worker

`workers` imports `frontier`; `frontier` never imports `workers`. Importing this package imports nothing
heavy: import the submodule you need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from multiprocessing.synchronize import Event


def worker_target(imported: Event, *args: object) -> None:
    """A worker process's target (workers.fetcher.run_worker), here so that a spawned worker unpickles it
    without importing the supervisor; `imported` is set once the worker's imports are done
    (frontier.cli.supervisor.Supervisor.start). SIGINT is ignored first, as run_worker does: a Ctrl-C in a terminal
    reaches every process of the crawl, and one that came during the imports (half a second of CPU, longer on a
    loaded machine) ended the worker with a KeyboardInterrupt traceback; the supervisor coordinates the stop."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from workers.fetcher import run_worker

    imported.set()
    run_worker(*args)  # type: ignore[arg-type]
