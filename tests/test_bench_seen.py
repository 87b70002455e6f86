"""Smoke test of `python -m frontier.bench seen`: it runs, prints its table, and exact rows have no false positives."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("rbloom")
pytest.importorskip("w3lib")

EXACT_ROWS = ("URLSeen exact", "set of URL strings", "set of xxh3_64 ints")
ALL_ROWS = EXACT_ROWS + ("URLSeen probabilistic", "SharedBloom, 2 processes", "SharedBloom, 1 process",
                         "rbloom xxh3 check-and-add", "rbloom update() (insert only)", "canonicalize (frontier)",
                         "w3lib canonicalize_url")


def test_bench_seen_quick(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # the bench's data dirs go under tmp only
    proc = subprocess.run([sys.executable, "-m", "frontier.bench", "seen", "--links", "20000", "--quick"],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert out.startswith("command: python -m frontier.bench seen --links 20000 --quick")
    header = next(line for line in out.splitlines() if line.startswith("structure"))
    assert "URLs/s (median)" in header and "vs rbloom xxh3 c&a" in header and "FP rate" in header
    rows = {}
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells[0] in ALL_ROWS:
            rows[cells[0]] = cells
    assert set(rows) == set(ALL_ROWS)
    for name in EXACT_ROWS:
        assert rows[name][-2:] == ["0", "0"], rows[name]  # first occurrences reported seen; unseen probe
    assert "targets (ratios measured in this run):" in out
    assert len(re.findall(r"^  (PASS|MISS)  ", out, re.M)) == 4
    assert not os.listdir(tmp_path) or all(not n.startswith("frontier-bench-") for n in os.listdir(tmp_path))
