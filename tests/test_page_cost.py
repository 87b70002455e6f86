"""What one hostile page costs extract_links (frontier.bench.page_cost measures it in a fresh child process): the
extra address space, RSS and CPU of one call, with the link scanner and with lexbor alone."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from frontier.bench.page_cost import PAGES, measure
from workers.links import scanner

PATHS = [pytest.param(True, id="scanner", marks=pytest.mark.skipif(scanner() is None, reason="not built")),
         pytest.param(False, id="lexbor")]


@pytest.fixture(scope="module")
def pages():
    with tempfile.TemporaryDirectory() as scratch:
        paths = {}
        for name in ("href-10M", "nul-32MiB"):
            paths[name] = Path(scratch) / name
            paths[name].write_bytes(PAGES[name]())
        yield paths


@pytest.mark.parametrize("native", PATHS)
def test_a_10m_character_href_costs_under_100_mb(pages, native):
    cost = measure(pages["href-10M"], native=native)
    assert (cost["links"], cost["skipped"]) == (0, 1)
    assert cost["vm"] < 100e6 and cost["rss"] < 100e6, cost


@pytest.mark.parametrize("native", PATHS)
def test_a_32_mib_page_after_a_nul_costs_under_4x_and_4_s(pages, native):
    cost = measure(pages["nul-32MiB"], native=native)
    assert cost["links"] == 1
    assert cost["rss"] < 4 * cost["size"] and cost["vm"] < 4 * cost["size"], cost
    assert cost["cpu"] < 4.0, cost
