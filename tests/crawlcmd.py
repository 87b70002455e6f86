"""What the suite runs: the frontier it imports, and how a test starts a crawl of that frontier.

The suite runs against the checkout (`PYTHONPATH=.` or an editable install) or against a built wheel installed
into a venv, with tests/ and the checkout's other files the tests read (configs/, docs/, README.md, ...) copied
out of the checkout (.ci/run). Every test starts a crawl with `crawl_argv()` and `crawl_env()`; the command runs
the frontier this process imports, wherever the child's working directory is. A test of the checkout's own
files (run_frontier.py) is marked `checkout_only`: against an installed wheel it is skipped, with the reason.

    ROOT        the folder tests/ is in: the checkout, or the copy .ci/run made
    PACKAGES    the folder the packages frontier and workers were imported from: ROOT, or site-packages
    INSTALLED   True when that is not ROOT (the suite tests an installed package)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

import frontier
from frontier.cli.commands import crawl_command

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = Path(frontier.__file__).resolve().parents[1]
INSTALLED = PACKAGES != ROOT
RUN_FRONTIER = ROOT / "run_frontier.py"

checkout_only = pytest.mark.skipif(INSTALLED, reason="checkout only: runs the checkout's run_frontier.py, which "
                                                     "no installed package has")


def crawl_argv(config: Path | str, *args: str) -> list[str]:
    """`frontier crawl --config config [args]` of the frontier this process imports."""
    return [*crawl_command(sys.executable), "--config", str(config), *args]


def crawl_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment with `extra` over it; in the checkout, with the checkout last on PYTHONPATH, so a
    crawl started from any folder imports this frontier (an installed package needs nothing: its venv has it)."""
    env = {**os.environ, **(extra or {})}
    if not INSTALLED:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), str(ROOT)]))
    return env
