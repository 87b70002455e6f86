"""The `frontier` console script's entry point: `crawl` and `fresh` go straight to the supervisor (no numpy, no
LMDB: start-up is on the clock of a small crawl), every other command, and --help, through frontier.__main__.
Apart from frontier.cli.commands so that neither it nor frontier.__main__ imports the other. `python -m
frontier.cli.script crawl ...` runs the same (frontier.cli.commands.crawl_command)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from frontier.cli.commands import SUPERVISOR_COMMANDS, build_parser, run_command


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] and argv[0] in SUPERVISOR_COMMANDS:
        parser = build_parser("frontier", "run or resume a crawl, or delete one", SUPERVISOR_COMMANDS)
        return run_command(parser, SUPERVISOR_COMMANDS, argv)
    from frontier.__main__ import main as all_commands

    return all_commands(argv, prog="frontier")


if __name__ == "__main__":
    sys.exit(main())
