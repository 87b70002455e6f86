"""`python -m frontier.bench page-cost`: what one hostile page costs `workers.links.extract_links`.

Each page of PAGES is written to a file, then read by a fresh child process (so that its peaks are its own)
which warms extract_links on a small page, resets its peak RSS (/proc/self/clear_refs), and calls
extract_links on the page as the fetcher does (max_url_length 2048, max_links 6000): once with the link scanner
(workers._linkscan) and once with FRONTIER_NO_NATIVE=1 (lexbor parses every page). Reported per page and path:
the links kept, the extra peak address space (VmPeak) and extra peak RSS (VmHWM) over the child before the
call, both in MB and as a multiple of the page's size, and the call's CPU seconds. `--tree DIR` measures the
extract_links of another checkout (one with its extensions built), for a before-and-after table.

The targets: any page within limits.max_body_bytes costs at most 4x its size in extra memory and 1 s of CPU per
10 MB; the 10M-character href under 100 MB of extra address space.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

MB = 1_000_000
PAGE_URL = "http://example.com/dir/page.html"
ROOT = Path(__file__).resolve().parents[2]
CHILD_TIMEOUT_S = 600.0


def long_href(size: int = 10 * MB) -> bytes:
    """One relative href of `size` characters: a query of size/4 parameters ("a=b&" each)."""
    return b'<a href="?' + b"a=b&" * (size // 4) + b'">x</a>'


def nul_links(size: int = 32 * 2**20) -> bytes:
    """One NUL, then `<a href=x>` to `size` bytes."""
    unit = b"<a href=x>"
    return b"\x00" + unit * ((size - 1) // len(unit))


def distinct_links(count: int = 2_000_000) -> bytes:
    """`count` links with distinct two-to-five-character hrefs."""
    return b"".join(b"<a href=%x>" % i for i in range(count))


def metas(count: int = 2_000_000) -> bytes:
    """`count` `<meta name=ab>` tags, then one link."""
    return b"<meta name=ab>" * count + b"<a href=x>"


PAGES: dict[str, Callable[[], bytes]] = {
    "href-10M": long_href, "nul-32MiB": nul_links, "a-2M": distinct_links, "meta-2M": metas}

_CHILD = """
import json, os, resource, sys, time
from workers.links import extract_links

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))

path, url = sys.argv[1], sys.argv[2]
extract_links(b'<a href="/x">x</a><a href="?a=b&amp;c">y</a>', url, max_url_length=2048, max_links=6000)
with open(path, "rb") as f:
    body = f.read()
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak RSS starts again from here
vm, rss = status("VmPeak"), status("VmHWM")
cpu = time.process_time()
batch = extract_links(body, url, max_url_length=2048, max_links=6000)
cpu = time.process_time() - cpu
print(json.dumps({"links": len(batch.links), "skipped": batch.skipped, "nofollow": batch.nofollow,
                  "vm": status("VmPeak") - vm, "rss": status("VmHWM") - rss, "cpu": cpu, "size": len(body)}))
"""


def measure(path: Path, *, native: bool, tree: Path = ROOT) -> dict[str, float]:
    """One extract_links call on the page in `path`, in a fresh child of `tree`'s code (see the module docstring)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("FRONTIER_NO_NATIVE", None)
    if not native:
        env["FRONTIER_NO_NATIVE"] = "1"
    done = subprocess.run([sys.executable, "-c", _CHILD, str(path), PAGE_URL], env=env, cwd=tree,
                          capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"the child failed on {path.name}: {done.stderr[-2000:]}")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m frontier.bench page-cost", description=__doc__.split("\n")[0])
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose extract_links is measured")
    parser.add_argument("--pages", default=",".join(PAGES), help=f"comma-separated, of {','.join(PAGES)}")
    parser.add_argument("--paths", default="scanner,lexbor", help="scanner, lexbor or both")
    args = parser.parse_args(argv)
    names = [p for p in args.pages.split(",") if p]
    unknown = [p for p in names if p not in PAGES]
    if unknown:
        parser.error(f"unknown page {unknown[0]!r}")
    paths = [p for p in args.paths.split(",") if p]
    print(f"tree {args.tree.resolve()}")
    print(f"{'page':<10} {'MB':>6} {'path':<8} {'links':>6} {'skipped':>8} {'+VM MB':>8} {'+RSS MB':>8} "
          f"{'RSS/size':>8} {'CPU s':>6}")
    with tempfile.TemporaryDirectory() as scratch:
        for name in names:
            path = Path(scratch) / name
            path.write_bytes(PAGES[name]())
            for kind in paths:
                r = measure(path, native=kind == "scanner", tree=args.tree)
                print(f"{name:<10} {r['size'] / MB:>6.1f} {kind:<8} {r['links']:>6} {r['skipped']:>8} "
                      f"{r['vm'] / MB:>8.1f} {r['rss'] / MB:>8.1f} {r['rss'] / r['size']:>8.2f} {r['cpu']:>6.2f}",
                      flush=True)
            path.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
