"""Compares two junit reports of the same Scrapy tests (stock, then frontier's classes as defaults): prints the
counts and every test that passed stock and did not pass with frontier's, and exits 1 if one of those is not in
the expected list (one test id a line, then " # " and the reason)."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def outcomes(report: Path) -> dict[str, str]:
    """test id -> passed | failed | skipped."""
    found = {}
    for case in ET.parse(report).iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        found[name] = ("failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed")
    return found


def main(stock_xml: str, frontier_xml: str, expected_txt: str) -> int:
    stock, frontier = outcomes(Path(stock_xml)), outcomes(Path(frontier_xml))
    expected = {line.split(" # ")[0].strip() for line in Path(expected_txt).read_text().splitlines()
                if line.strip() and not line.startswith("#")}
    for label, report in (("stock", stock), ("frontier", frontier)):
        counts = {kind: sum(1 for v in report.values() if v == kind) for kind in ("passed", "failed", "skipped")}
        # Not in a test runner's closing-line form: CI reads those lines as the run's own verdict.
        print(f"scrapy-suite ({label}): passing {counts['passed']}, failing {counts['failed']}, "
              f"skipped {counts['skipped']}")
    worse = sorted(name for name, kind in stock.items() if kind == "passed" and frontier.get(name) != "passed")
    unexpected = [name for name in worse if name not in expected]
    for name in worse:
        print(f"scrapy-suite: {'expected' if name in expected else 'REGRESSION'}: {name} ({frontier.get(name, 'missing')})")
    print(f"scrapy-suite: {len(worse)} pass stock and not with frontier's classes, {len(unexpected)} unexpected")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
