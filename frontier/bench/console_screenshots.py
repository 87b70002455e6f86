"""`python -m frontier.bench console-screenshots`: pictures of the console page during a real crawl, for the docs.

A crawl of the mock web (four hosts) and of the trap site (so the traps table has suspects) runs with
`python -m frontier crawl`; Debian's chromium, driven by Playwright with `executable_path` (no browser download),
opens the console at the address in DATA_DIR/console.json, pauses and resumes the crawl through the page's
buttons (so the audit log has lines), and saves, in --out (docs/img by default):

    console-page.png       the whole page
    console-progress.png   totals, rates and the rate chart
    console-control.png    the buttons and forms
    console-hosts.png      the hosts table

Needs the test extra (playwright) and a chromium on PATH (or --chromium). The crawl ends with SIGTERM, a clean stop.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from frontier.testing import MockWeb, SiteSpec
from frontier.testing.sitegraph import LOOPBACK
from frontier.testing.traps import TrapSpec, TrapWeb

VIEWPORT = {"width": 1280, "height": 900}
SECTIONS = {  # file stem -> the section's heading id in index.html
    "console-progress": "h-totals",
    "console-control": "h-control",
    "console-hosts": "h-hosts",
}


def crawl_config(web: MockWeb, traps: TrapWeb, data_dir: Path) -> dict[str, Any]:
    """A crawl slow enough to watch: 50 ms between a host's fetches, two workers of eight fetches."""
    return {
        "seeds": [web.seed, traps.seed],
        "scope": {"allowed_hosts": [f"{LOOPBACK}:{p}" for p in web.ports + traps.ports]},
        "storage": {"data_dir": str(data_dir)},
        "output": {"progress": "off"},
        "politeness": {"delay": 0.05},
        "workers": {"processes": 2, "concurrency": 8},
    }


def wait_for_file(path: Path, proc: subprocess.Popen[bytes], timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the crawl exited ({proc.returncode}) before its console started")
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            time.sleep(0.1)
    raise RuntimeError(f"no {path} after {timeout:g} s")


def take(url: str, out: Path, chromium: str, watch: float) -> list[Path]:
    """Open the page, let it watch the crawl for `watch` seconds, act through it, save the pictures."""
    from playwright.sync_api import sync_playwright

    saved = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(url)
            page.wait_for_function("document.getElementById('state').textContent === 'running'", timeout=30_000)
            page.wait_for_timeout(watch * 1000 / 2)
            for button, state in (("#pause", "paused"), ("#resume", "running")):
                page.click(button)
                page.wait_for_function(f"document.getElementById('state').textContent === '{state}'",
                                       timeout=30_000)
                page.wait_for_timeout(2000)
            page.wait_for_timeout(watch * 1000 / 2)
            path = out / "console-page.png"
            page.screenshot(path=str(path), full_page=True)
            saved.append(path)
            for stem, heading in SECTIONS.items():
                path = out / f"{stem}.png"
                page.locator(f"section[aria-labelledby={heading}]").screenshot(path=str(path))
                saved.append(path)
        finally:
            browser.close()
    return saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m frontier.bench console-screenshots", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("docs/img"), help="directory of the pictures (docs/img)")
    parser.add_argument("--watch", type=float, default=20.0, help="seconds the page watches the crawl (20)")
    parser.add_argument("--chromium", default=shutil.which("chromium"), help="the browser (chromium on PATH)")
    args = parser.parse_args(argv)
    if not args.chromium:
        print("console-screenshots: no chromium on PATH (apt-get install chromium) and no --chromium", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="frontier-console-") as tmp, \
            MockWeb.serve_in_thread(SiteSpec(pages=20_000, hosts=4, seed=7)) as web, \
            TrapWeb.serve_in_thread(TrapSpec(traps=("calendar", "search"))) as traps:
        data_dir = Path(tmp) / "data"
        config = Path(tmp) / "crawl.yaml"
        config.write_text(yaml.safe_dump(crawl_config(web, traps, data_dir), sort_keys=False))
        log = Path(tmp) / "crawl.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "frontier", "crawl", "--config", str(config)], cwd=tmp,
                                    stdout=out, stderr=subprocess.STDOUT)
        try:
            console = wait_for_file(data_dir / "console.json", proc, 60.0)
            for path in take(console["url"], args.out, args.chromium, args.watch):
                print(path)
        except Exception:
            print(log.read_text(errors="replace")[-4000:], file=sys.stderr)
            raise
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
