"""The fetch side of frontier: worker processes that fetch pages and extract their links.

    workers.links    extract_links(body, page_url, ...) -> LinkBatch   (pure; selectolax; no aiohttp)
    workers.fetcher  Fetcher (async, one aiohttp session) and run_worker (the spawned process's target)
    workers.body     a response body read and decoded with a cap, and sniffed (HTML? binary?)
    workers.channel  a worker's ends of the job and result queues, between them and its event loop
    workers.warc     WarcWriter: one gzip WARC file per worker

`workers` imports `frontier`; `frontier` never imports `workers`. Importing this package imports nothing
heavy: import the submodule you need.
"""
