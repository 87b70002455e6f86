"""The commands of `python -m frontier` and of the `frontier` console script (frontier.cli.script), with
`crawl` and `fresh` on a fast path.

    frontier crawl --config crawl.yaml [--fresh [--yes]]    run or resume a crawl (= python run_frontier.py)
    frontier fresh --config crawl.yaml [--yes]              delete a crawl, crawl nothing
    frontier status|export|params|blacklist|recrawl ...     as `python -m frontier ...`

`crawl` and `fresh` go straight to frontier.cli.supervisor, which imports no numpy or LMDB (start-up is on the
clock of a small crawl); the other commands, and --help, go through frontier.__main__ (which imports the
library). This module imports little on purpose: the spawn start method re-runs the script, and so imports
this module, in every process of a crawl.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType

from frontier.errors import ConfigError

# (help, add_arguments(parser), run(args) -> exit status)
Command = tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]


def _supervisor() -> ModuleType:
    from frontier.cli import supervisor

    return supervisor


SUPERVISOR_COMMANDS: dict[str, Command] = {
    "crawl": ("run or resume a crawl; with --fresh --yes it first deletes the crawl, then crawls",
              lambda parser: _supervisor().crawl_arguments(parser), lambda args: _supervisor().crawl(args)),
    "fresh": ("delete what a crawl created (its data dir's crawl files, a Redis crawl's keys), and crawl nothing",
              lambda parser: _supervisor().fresh_arguments(parser), lambda args: _supervisor().fresh(args)),
}


def crawl_command(python: str = sys.executable) -> list[str]:
    """`frontier crawl` as an argv for `python` (append `--config FILE` and the options): the console script's code
    run by module name, so it crawls with whichever frontier `python` imports (a checkout on its path, an installed
    package) and needs no console script on PATH; as with the script, a spawned child re-imports only
    frontier.cli.script and this module. The benchmarks and the tests start their crawls with it."""
    return [python, "-m", "frontier.cli.script", "crawl"]


def build_parser(prog: str, description: str, commands: Mapping[str, Command]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    sub = parser.add_subparsers(dest="command", metavar="command", required=True)
    for name, (help_text, add_arguments, _) in commands.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        add_arguments(command)
        command.set_defaults(parser=command)
    return parser


def run_command(parser: argparse.ArgumentParser, commands: Mapping[str, Command], argv: Sequence[str] | None) -> int:
    """Parse and run; a ConfigError the library raised is reported as the option it came from (status 2)."""
    args = parser.parse_args(argv)
    try:
        return commands[args.command][2](args)
    except ConfigError as e:
        option = "--" + e.key.replace("_", "-") if e.key else None
        message = str(e).removeprefix(f"{e.key}: ") if e.key else str(e)
        args.parser.error(f"{option}: {message}" if option else message)  # prints usage, exits with status 2
        raise  # not reached
