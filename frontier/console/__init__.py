"""The operator's console: watch and steer a running crawl.

    control     `Controls`: the control actions (pause, resume, stop, seeds, exclusions, blocks, delays, retired
                hosts, released trap patterns, checkpoint), checked and applied on the frontier loop's thread,
                each written to the audit log; `ControlError` for bad input
    checkpoint  a consistent copy of a running LMDB crawl's state, a data dir to resume from
    inbox       the action directory DATA_DIR/actions/ that the frontier loop reads each turn
(`frontier ctl ACTION`, the command-line client of a running crawl's console, is frontier.cli.ctl.)

May import: frontier.crawl, frontier.state, frontier.seen, frontier.url, frontier.config and the base; never cli,
scrapy or workers. `import frontier` does not import this package.
"""
