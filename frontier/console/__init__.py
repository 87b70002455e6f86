"""The operator's console: watch and steer a running crawl from a browser, the API and the CLI.

    server      `ConsoleServer`: aiohttp on a daemon thread of the frontier process; each request waits for the
                frontier loop, which answers it at its next turn (the loop owns the crawl state)
    live        `LiveView`: the figures of the running crawl, built on the loop's thread
    reports     the tables (hosts, queues, seeds) for the page and for `frontier report`, their paging, CSV, JSON
    procs       the CPU and memory of the crawl's processes (/proc)
    control     `Controls`: the control actions (pause, resume, stop, seeds, exclusions, blocks, delays, retired
                hosts, released trap patterns, checkpoint), checked and applied on the frontier loop's thread,
                each written to the audit log; `ControlError` for bad input
    checkpoint  a consistent copy of a running LMDB crawl's state, a data dir to resume from
    inbox       the action directory DATA_DIR/actions/ that the frontier loop reads each turn
    static/     the page's files (HTML, JS, CSS; vendor/uplot/: the chart library, uPlot from npm), package data
(`frontier ctl ACTION`, the command-line client of a running crawl's console, is frontier.cli.ctl.)

May import: frontier.crawl, frontier.state, frontier.seen, frontier.url, frontier.config and the base; never cli,
scrapy or workers. `import frontier` does not import this package, and aiohttp is imported by the server's thread
only.
"""
