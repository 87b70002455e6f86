"""Smoke test of `python -m frontier.bench seen`: it runs, prints its table with the reference row first among
the peers and the implementation path of every row, and exact rows have no false positives."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("rbloom")
pytest.importorskip("w3lib")

EXACT_ROWS = ("URLSeen exact", "set of URL strings", "set of xxh3_64 ints")
ALL_ROWS = EXACT_ROWS + ("URLSeen probabilistic", "SharedBloom add_many (fingerprints given)",
                         "SharedBloom, 2 processes", "SharedBloom, 1 process", "rbloom plain loop (default hash)",
                         "rbloom plain loop, xxh3 hash_func", "rbloom update() (insert only)",
                         "canonicalize (frontier, per URL)", "canonicalize_many (frontier, batches of 1,000)",
                         "w3lib canonicalize_url")


def test_bench_seen_quick(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # the bench's data dirs go under tmp only
    proc = subprocess.run([sys.executable, "-m", "frontier.bench", "seen", "--links", "20000", "--quick"],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert out.startswith("command: python -m frontier.bench seen --links 20000 --quick")
    header = re.split(r"\s{2,}", next(line for line in out.splitlines() if line.startswith("structure")).strip())
    assert header[1:4] == ["URLs/s (median)", "runs", "vs reference"] and header[-1] == "path"
    rows = {}
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells[0] in ALL_ROWS:
            rows[cells[0]] = dict(zip(header, cells))
    assert set(rows) == set(ALL_ROWS)
    for name in EXACT_ROWS:  # first occurrences reported seen; unseen probe
        assert (rows[name]["FP rate (first occ.)"], rows[name]["FP rate (unseen probe)"]) == ("0", "0"), rows[name]
    assert rows["rbloom plain loop (default hash)"]["vs reference"] == "1.00x"
    assert rows["rbloom plain loop (default hash)"]["path"] == "compiled (Rust)"
    assert rows["w3lib canonicalize_url"]["vs reference"] == "1.00x w3lib"
    assert rows["URLSeen exact"]["path"] and rows["SharedBloom, 1 process"]["path"]  # pure Python or compiled (...)
    assert "targets (ratios measured in this run):" in out
    assert len(re.findall(r"^  (PASS|MISS)  ", out, re.M)) == 6 + 6  # the main targets, and the per-URL-shape ones
    shapes = {}  # the reference and both URLSeen rows on each URL shape, each ratio to its own stream's reference
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        m = re.fullmatch(r"(short|medium|long) URLs \((\d+) B\): (.*)", cells[0])
        if m:
            shapes[m[1], m[3]] = (int(m[2]), dict(zip(header, cells)))
    assert {name for _, name in shapes} == {"rbloom plain loop (default hash)", "URLSeen exact", "URLSeen probabilistic"}
    assert len(shapes) == 9
    short, medium, long = (shapes[s, "URLSeen exact"][0] for s in ("short", "medium", "long"))
    assert 40 <= short < medium < long and medium >= 70 and long >= 130
    for shape in ("short", "medium", "long"):
        assert shapes[shape, "rbloom plain loop (default hash)"][1]["vs reference"] == "1.00x"
        assert shapes[shape, "URLSeen exact"][1]["FP rate (first occ.)"] == "0"
    assert not os.listdir(tmp_path) or all(not n.startswith("frontier-bench-") for n in os.listdir(tmp_path))


def test_bench_seen_shapes_only(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "frontier.bench", "seen", "--links", "20000", "--quick",
                           "--shapes-only"], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert len(re.findall(r"^(short|medium|long) URLs \(\d+ B\): ", out, re.M)) == 9
    assert len(re.findall(r"^  (PASS|MISS)  (short|medium|long) URLs", out, re.M)) == 6
    assert "SharedBloom" not in out
