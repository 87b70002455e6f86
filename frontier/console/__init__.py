"""The operator's console: a live page, a JSON API and reports of a running crawl, served by the frontier process.

    server   ConsoleServer: aiohttp on a daemon thread; requests wait for the frontier loop, which answers them
    live     LiveView: the figures of the running crawl, built on the loop's thread (it owns the crawl state)
    reports  the tables (hosts, queues, seeds) for the page and for `frontier report`, their paging, CSV and JSON
    procs    the CPU and memory of the crawl's processes (/proc)
    static/  the page's files (HTML, JS, CSS), package data

May import: frontier.crawl, frontier.state, frontier.config, frontier.url and the base (errors); never cli or
workers. aiohttp is imported by the server's thread only, so `import frontier.console` stays light.
"""
