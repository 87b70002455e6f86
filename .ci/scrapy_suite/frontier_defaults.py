"""pytest plugin for Scrapy's own tests under .ci/scrapy-suite: with FRONTIER_SUITE_DATA_DIRS=1 each test gets a
FRONTIER_DATA_DIR of its own (in Scrapy's defaults and in the environment its subprocesses inherit), so that
state one test leaves cannot reach the next; without it the plugin's own default applies."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _frontier_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    if os.environ.get("FRONTIER_SCRAPY_DEFAULTS") != "1" or os.environ.get("FRONTIER_SUITE_DATA_DIRS") != "1":
        yield
        return
    from scrapy.settings import default_settings

    path = str(Path(tmp_path_factory.mktemp("frontier")) / "%(name)s")
    os.environ["FRONTIER_DATA_DIR"] = default_settings.FRONTIER_DATA_DIR = path
    try:
        yield
    finally:
        del os.environ["FRONTIER_DATA_DIR"], default_settings.FRONTIER_DATA_DIR
