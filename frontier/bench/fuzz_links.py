"""`python -m frontier.bench fuzz-links --seconds 600`: the link scanner against lexbor on random pages.

For --seconds (wall time), pages from `frontier.testing.htmlgen` (random_page, and one in ten random_table_page),
each from its own seed (--seed + its number, so a mismatch is reproduced with `--seed N --pages 1`), go
through `workers.links.extract_links` twice: with the link scanner (workers._linkscan) and with lexbor alone
(FRONTIER_NO_NATIVE=1), with nofollow honoured or not and max_links from 0 to 6 drawn per page; the links must be
equal. Reported: pages, the share the scanner answered (the rest it gave back to lexbor), mismatches (each
written out with its seed and both answers, the first --show of them), pages/s. Exit status 1 on a mismatch,
2 when the scanner is not built.
"""

from __future__ import annotations

import argparse
import os
import random
import time

from frontier.native import NO_NATIVE_ENV
from frontier.testing.htmlgen import random_page, random_table_page
from workers.links import LinkBatch, extract_links, scanner

PAGE_URL = "http://example.com/dir/page.html"


def _links(body: bytes, native: bool, honor: bool, max_links: int) -> LinkBatch:
    """extract_links with the scanner switched on or off (FRONTIER_NO_NATIVE, read on each call)."""
    saved = os.environ.pop(NO_NATIVE_ENV, None)
    if not native:
        os.environ[NO_NATIVE_ENV] = "1"
    try:
        return extract_links(body, PAGE_URL, honor_nofollow=honor, max_links=max_links)
    finally:
        os.environ.pop(NO_NATIVE_ENV, None)
        if saved is not None:
            os.environ[NO_NATIVE_ENV] = saved


def fuzz(seconds: float, seed: int = 0, pages: int | None = None, show: int = 5) -> tuple[int, int, int]:
    """(pages checked, pages the scanner answered, mismatches) over `seconds` or `pages`, whichever ends first."""
    scan = scanner()
    if scan is None:
        raise RuntimeError("workers._linkscan is not built (or FRONTIER_NO_NATIVE is set)")
    end = time.monotonic() + seconds
    done = answered = mismatches = 0
    while time.monotonic() < end and (pages is None or done < pages):
        rng = random.Random(seed + done)
        page = random_table_page(rng) if rng.random() < 0.1 else random_page(rng)
        honor, max_links = rng.random() < 0.5, rng.randint(0, 6)
        answered += scan(page) is not None
        body = page.encode("utf-8", "surrogatepass")
        got, want = _links(body, True, honor, max_links), _links(body, False, honor, max_links)
        if got.links != want.links:
            mismatches += 1
            if mismatches <= show:
                print(f"mismatch, seed {seed + done}: {page!r}\n  scanner {got.links}\n  lexbor  {want.links}",
                      flush=True)
        done += 1
    return done, answered, mismatches


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m frontier.bench fuzz-links", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="wall time to fuzz for")
    parser.add_argument("--seed", type=int, default=0, help="the first page's seed (page i: seed + i)")
    parser.add_argument("--pages", type=int, default=None, help="stop after this many pages")
    parser.add_argument("--show", type=int, default=5, help="mismatches written out")
    args = parser.parse_args(argv)
    try:
        start = time.monotonic()
        done, answered, mismatches = fuzz(args.seconds, args.seed, args.pages, args.show)
    except RuntimeError as exc:
        print(f"fuzz-links: {exc}")
        return 2
    took = time.monotonic() - start
    print(f"fuzz-links: {done} pages (seeds {args.seed}..{args.seed + done - 1}) in {took:.0f} s "
          f"({done / max(took, 1e-9):.0f}/s); the scanner answered {answered / max(done, 1):.0%}; "
          f"{mismatches} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
