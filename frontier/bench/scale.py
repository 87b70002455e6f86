"""`python -m frontier.bench scale`: the seen-test's cost per URL from 10^6 to 10^8 (and beyond) URLs.

For each N of --sizes, each mode and each filter layout of --layouts (`dedup.blocked`: each URL's bits in one
cache line; standard: k lines), in a fresh spawned process (so that its RSS and I/O counters are its
own): a URLSeen of capacity N at error rate 1e-4 in a temporary data dir is fed N distinct canonical URLs in
batches of --batch (`add_many(batch, canonical=True)`; the URLs are generated outside the timing and checked
canonical on a sample). Reported:

* the cost per URL of each tenth of the stream (flat means the log does not get dearer as it grows) and of
  the whole run, and the longest single `add_many` (the worst stall a caller sees, merges included) and
  which batch it was. Costs are CPU time of the process (user + system: the kernel's share of LMDB's
  writes and page faults counts), which other load on a shared machine disturbs less than wall time;
  wall time is shown too;
* peak RSS (which counts the pages of the LMDB file the process has read through its memory map, and the
  Bloom filter's shared memory once touched) and peak RssAnon (the process's own memory, sampled every
  100 batches); the LMDB file's size on disk per URL; the bytes the process caused to be written
  (/proc/self/io write_bytes) per URL and per stored byte (write amplification);
* the fingerprint log's work: flushes of the pending set, merges completed, merge steps, levels, and
  the CPU time of that maintenance per URL (and of the longest single maintenance);
* the false-positive rate: every URL is new, so each one reported seen is a false positive (exact: 0);
* exact mode only, a confirm probe: --probes URLs added long before (no LRU hit) sent again, so each is a
  Bloom "maybe" the log must confirm: the cost per lookup at that size; then as many others deferred
  (`add_fingerprints(defer=)`, frontier.seen.parked) and answered by one sweep: the cost per URL of parking,
  sweeping and the share memory answered; `--cold` empties the page cache before each probe (root), as a
  log larger than the machine's memory leaves it;
* the Bloom filter alone: a fresh SharedBloom of capacity N doing the same check-and-add (fingerprints
  included) for --reference URLs (at most N/10, after as many untimed ones); "rest" is the URLSeen cost
  minus that: what the log, the LRU and the bookkeeping add. The filter's bits grow with N (2.4 MB at
  10^6, 240 MB at 10^8), so its random probes miss the CPU caches more as N grows: that growth is the
  filter's, not the log's (one line a URL in the blocked layout, k in the standard one).

The last lines compare whole-run costs across sizes (goal: largest / smallest <= 1.25 per mode), for
URLSeen, for the rest, and for the log's flushes and merges alone.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import queue
import random
import resource
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

SPAWN = multiprocessing.get_context("spawn")
DEFAULT_SIZES = "1e6,1e7,1e8"
LAYOUTS = ("standard", "blocked")
ERROR_RATE = 1e-4
BATCH = 10_000
PROBES = 100_000
REFERENCE = 1_000_000
CHILD_TIMEOUT_S = 6 * 3600.0
TARGET_FLAT = 1.25  # largest / smallest whole-run cost per URL across sizes


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m frontier.bench scale", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=DEFAULT_SIZES, help=f"comma-separated N (default {DEFAULT_SIZES})")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--exact", dest="modes", action="store_const", const=("exact",), help="exact mode only")
    mode.add_argument("--probabilistic", dest="modes", action="store_const", const=("probabilistic",),
                      help="probabilistic mode only")
    mode.add_argument("--both", dest="modes", action="store_const", const=("exact", "probabilistic"),
                      help="both modes (the default)")
    p.add_argument("--layouts", default=",".join(LAYOUTS),
                   help=f"comma-separated filter layouts, of {', '.join(LAYOUTS)} (default both, side by side)")
    p.add_argument("--batch", type=int, default=BATCH, help=f"URLs per add_many (default {BATCH:,})")
    p.add_argument("--probes", type=int, default=PROBES, help=f"exact-mode confirm probe size (default {PROBES:,})")
    p.add_argument("--reference", type=int, default=REFERENCE,
                   help=f"URLs through the Bloom filter alone (default {REFERENCE:,}, at most N)")
    p.add_argument("--cold", action="store_true", help="empty the page cache before each confirm probe (root)")
    p.add_argument("--dir", default=None, help="where the temporary data dirs go (default: the system's tmp)")
    p.add_argument("--plot", type=Path, default=None, metavar="FILE.svg",
                   help="also draw the CPU us/URL of each tenth of each stream over the URLs fed (needs matplotlib)")
    args = p.parse_args(argv)
    args.modes = args.modes or ("exact", "probabilistic")
    args.layouts = [layout.strip() for layout in args.layouts.split(",") if layout.strip()]
    if not args.layouts or set(args.layouts) - set(LAYOUTS):
        p.error(f"--layouts: a comma-separated list of {', '.join(LAYOUTS)}, got {','.join(args.layouts)!r}")
    try:
        args.sizes = [int(float(s)) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        p.error(f"--sizes: not a list of numbers: {args.sizes!r}")
    if not args.sizes or min(args.sizes) < args.batch:
        p.error("--sizes: each N must be at least --batch")
    return args


def url(i: int) -> str:
    """The i-th URL of the stream: canonical, distinct, spread over 65,521 hosts."""
    return f"https://h{i % 65521}.example.com/a/{i // 65521}/p{i}.html"


def partitions(n: int, blocked: bool) -> int:
    """The filter's partitions: the default, or as an operator must set `dedup.partitions` past about 5 x 10^8
    URLs at 1e-4 (each partition under 2^28 bits), the fewest that do."""
    from frontier.seen.bloom import DEFAULT_PARTITIONS
    from frontier.seen.sizing import partitions_needed

    return max(DEFAULT_PARTITIONS, partitions_needed(n, ERROR_RATE, blocked=blocked))


def _write_bytes() -> int:
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    return 0


def _rss_anon() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


def _disk_bytes(path: Path) -> int:
    return sum(f.stat().st_blocks * 512 for f in path.iterdir() if f.is_file())


def _one(n: int, exact: bool, blocked: bool, batch: int, probes: int, cold: bool, reference: int, parent: str | None,
         out) -> None:
    """Run one size in one mode; send a dict of results (or an error string)."""
    from frontier.seen.urlseen import URLSeen
    from frontier.url.canonical import canonicalize

    try:
        sample = random.Random(n).sample(range(n), 1000)
        if any(canonicalize(url(i)) != url(i) for i in sample):
            raise AssertionError("the generated URLs are not canonical")
        path = Path(tempfile.mkdtemp(prefix="frontier-scale-", dir=parent))
        try:
            batches = n // batch
            tenths = [0.0] * 10
            counts = [0] * 10
            longest = longest_cpu = 0.0
            longest_at = 0
            wall = 0.0
            anon = _rss_anon()
            false_positives = 0
            written = _write_bytes()
            with URLSeen(path, capacity=n, error_rate=ERROR_RATE, exact=exact, blocked=blocked,
                         partitions=partitions(n, blocked)) as seen:
                add_many = seen.add_many
                for b in range(batches):
                    urls = [url(i) for i in range(b * batch, (b + 1) * batch)]
                    t, cpu = time.perf_counter(), time.process_time()
                    flags = add_many(urls, canonical=True)
                    cpu, took = time.process_time() - cpu, time.perf_counter() - t
                    false_positives += flags.count(False)
                    tenth = b * 10 // batches
                    tenths[tenth] += cpu
                    counts[tenth] += batch
                    wall += took
                    if cpu > longest_cpu:
                        longest_cpu, longest_at = cpu, b
                    longest = max(longest, took)
                    if b % 100 == 0:
                        anon = max(anon, _rss_anon())
                written = _write_bytes() - written
                log = seen.log.stats()
                result = {
                    "n": batches * batch, "mode": "exact" if exact else "probabilistic",
                    "layout": "blocked" if blocked else "standard", "tenths":
                    [t / c * 1e6 for t, c in zip(tenths, counts) if c], "cpu_s": sum(tenths), "wall_s": wall,
                    "longest_s": longest, "longest_cpu_s": longest_cpu, "longest_at": longest_at, "anon": anon,
                    "false_positives": false_positives, "written": written, "log": log,
                    "bloom_bytes": seen.bloom.nbytes, "lmdb_bytes": _disk_bytes(path),
                }
                if exact:
                    result["confirm"], result["deferred"] = _probes(seen, batches * batch, batch, probes, cold)
            result["maxrss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            result["bloom_us"] = _bloom_alone(n, blocked, batch, min(reference, n // 10))
            out.put(result)
        finally:
            shutil.rmtree(path, ignore_errors=True)
    except BaseException as e:  # the parent prints it
        out.put(f"{type(e).__name__}: {e}")


def _probes(seen, n: int, batch: int, probes: int, cold: bool) -> tuple[dict, dict]:
    """Cost per URL of sending again URLs added long before (the first 90%): Bloom "maybe", confirmed in the
    log at once; then of as many others deferred and answered by one sweep (CPU and wall us/URL each)."""
    from frontier.seen.fpset import digests

    ids = random.Random(1).sample(range(n * 9 // 10), min(2 * probes, n * 9 // 10))
    now, later = ids[:len(ids) // 2], ids[len(ids) // 2:]
    _drop_page_cache(cold)
    took, wall = 0.0, time.perf_counter()
    for start in range(0, len(now), batch):
        urls = [url(i) for i in now[start:start + batch]]
        t = time.process_time()
        flags = seen.add_many(urls, canonical=True)
        took += time.process_time() - t
        if any(flags):
            raise AssertionError("a URL added before was reported new")
    per = 1e6 / max(1, len(now))
    confirm = {"us": took * per, "wall_us": (time.perf_counter() - wall) * per}
    _drop_page_cache(cold)
    t, wall = time.process_time(), time.perf_counter()
    for start in range(0, len(later), batch):
        blob = digests([url(i) for i in later[start:start + batch]])
        if any(seen.add_fingerprints([blob[j:j + 16] for j in range(0, len(blob), 16)],
                                     defer=lambda fps: [b""] * len(fps))):
            raise AssertionError("a URL added before was reported new")
    parked, parked_at = seen.parked, (time.process_time() - t, time.perf_counter() - wall)
    if seen.sweep(lambda txn, fps, payloads: None):
        raise AssertionError("a sweep found a URL added before new")
    cpu, wall = time.process_time() - t, time.perf_counter() - wall
    per = 1e6 / max(1, len(later))
    return confirm, {"us": cpu * per, "wall_us": wall * per, "park_us": parked_at[0] * per,
                                           "parked": parked / max(1, len(later))}


def _drop_page_cache(cold: bool) -> None:
    if cold:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1")


def _bloom_alone(n: int, blocked: bool, batch: int, count: int) -> float:
    """CPU us per URL of the check-and-add URLSeen does, on a SharedBloom of capacity n alone: `count` URLs
    timed after untimed ones that touch every page of the filter first (a page's first write faults; in a
    whole run that cost is spread over all N URLs, here it would not be): as many, and at least 7 per 4 KiB
    page, which leaves 0.1% of the pages untouched (at 10^9, `count` of them left a quarter, whose faults
    read as 1.5 us/URL)."""
    from frontier.seen.bloom import SharedBloom
    from frontier.seen.fingerprint import fingerprints

    took = 0.0
    with SharedBloom.create(n, ERROR_RATE, blocked=blocked, partitions=partitions(n, blocked)) as bloom:
        untimed = -(-max(count, 7 * bloom.nbytes // 4096) // batch) * batch  # whole batches: `count` are timed
        try:
            for start in range(0, untimed + count, batch):
                urls = [url(i) for i in range(start, min(untimed + count, start + batch))]
                t = time.process_time()
                with bloom.adding(fingerprints(urls)):
                    pass
                if start >= untimed:
                    took += time.process_time() - t
        finally:
            bloom.unlink()
    return took / count * 1e6


def _run_child(n: int, exact: bool, blocked: bool, args: argparse.Namespace) -> dict | str:
    out = SPAWN.Queue()
    child = SPAWN.Process(target=_one, args=(n, exact, blocked, args.batch, args.probes, args.cold, args.reference,
                                             args.dir,
                                             out), daemon=True)
    child.start()
    try:
        while True:
            try:
                return out.get(timeout=5)
            except queue.Empty:
                if not child.is_alive():
                    return f"the child died (exit code {child.exitcode})"
    finally:
        child.join(60)
        if child.is_alive():
            child.kill()
            child.join()


def _row(r: dict) -> str:
    n = r["n"]
    log = r["log"]
    tenths = r["tenths"]
    cost = r["cpu_s"] / n * 1e6
    return " | ".join([
        "", r["mode"], r["layout"], f"{n:.0e}".replace("e+0", "e"), f"{cost:.2f} ({r['wall_s'] / n * 1e6:.2f})",
        " ".join(f"{t:.2f}" for t in tenths), f"{max(tenths) / min(tenths):.2f}",
        f"{r['bloom_us']:.2f} / {cost - r['bloom_us']:.2f}",
        f"{log['maintain_cpu_seconds'] / n * 1e6:.2f} ({log['maintain_cpu_seconds_max'] * 1e3:.0f})",
        f"{r['longest_cpu_s'] * 1e3:.0f} ({r['longest_s'] * 1e3:.0f}), #{r['longest_at']}",
        f"{r['maxrss'] / 2**20:,.0f} / {r['anon'] / 2**20:,.0f}", f"{r['lmdb_bytes'] / n:.1f}",
        f"{r['written'] / n:.1f} ({r['written'] / (16 * n):.1f}x)",
        f"{log['flushes']} / {log['merges_done']} / {log['merge_steps']} / {log['levels']}",
        f"{r['false_positives'] / n:.2e}",
        "-" if "confirm" not in r else "{us:.2f} ({wall_us:.2f})".format(**r["confirm"]),
        "-" if "deferred" not in r else "{us:.2f} ({wall_us:.2f}), park {park_us:.2f}, {parked:.0%} parked".format(
            **r["deferred"]), ""]).strip()


def _ratio(values: list[float]) -> str:
    """largest / smallest = ratio, judged against the goal; no ratio when the smallest is not above 0 (a
    "rest" below 0: the filter alone measured dearer than the whole run, which is noise)."""
    high, low = max(values), min(values)
    if low <= 0:
        return f"{high:.2f} / {low:.2f}: no ratio (a value at or below 0 is noise: rerun)"
    ratio = high / low
    return f"{high:.2f} / {low:.2f} = {ratio:.2f} (goal <= {TARGET_FLAT}: {'met' if ratio <= TARGET_FLAT else 'missed'})"


def plot_tenths(path: Path, results: dict[str, list[dict]], command: str) -> None:
    """Each run's cost per URL by tenth of its stream, placed at the tenth's middle in URLs fed (log scale): a
    flat line is a cost that does not grow with the stream."""
    from frontier.bench import plot

    series = {}
    for label, rows in results.items():
        for r in rows:
            n, tenths = r["n"], r["tenths"]
            xs = [n * (i + 0.5) / len(tenths) for i in range(len(tenths))]
            series[f"{label}, N = {n:.0e}".replace("e+0", "e")] = (xs, tenths)
    plot.lines(path, series, title="URLSeen: CPU per URL along the stream", xlabel="URLs fed (log scale)",
               ylabel="CPU us per URL", command=command, logx=True)
    print(f"plot: {path}")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = shlex.join(["python", "-m", "frontier.bench", "scale", *argv])
    print(f"command: {command}")
    print(f"machine: {os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}, "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"settings: sizes {', '.join(f'{n:,}' for n in args.sizes)}; modes {', '.join(args.modes)}; filter "
          f"layouts {', '.join(args.layouts)}; batch "
          f"{args.batch:,}; error rate {ERROR_RATE:g}; capacity = N; partitions: the default 64, or the fewest "
          "that keep each under 2^28 bits; one process per row")
    print()
    print("| mode | filter | N | us/URL CPU (wall) | CPU us/URL per tenth of the stream | tenth max/min | Bloom alone / rest "
          "| flush + merges CPU us/URL (longest ms) | longest add_many ms CPU (wall), batch # "
          "| peak RSS / RssAnon MiB | LMDB B/URL | written B/URL (x stored) | flushes / merges / steps / levels "
          "| FP rate | confirm CPU us/URL (wall) | deferred: park + sweep CPU us/URL (wall) |")
    print("|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    results: dict[str, list[dict]] = {}
    failed = False
    for mode in args.modes:
        for layout in args.layouts:
            for n in args.sizes:
                r = _run_child(n, mode == "exact", layout == "blocked", args)
                if isinstance(r, str):
                    print(f"| {mode} | {layout} | {n:.0e} | failed: {r} |", flush=True)
                    failed = True
                    continue
                results.setdefault(f"{mode}, {layout} filter", []).append(r)
                print(_row(r), flush=True)
                if mode == "exact" and r["false_positives"]:
                    print(f"error: exact mode reported {r['false_positives']} new URLs as seen", file=sys.stderr)
                    failed = True
    print()
    for mode, rows in results.items():
        if len(rows) < 2:
            continue
        costs = [r["cpu_s"] / r["n"] * 1e6 for r in rows]
        rest = [c - r["bloom_us"] for c, r in zip(costs, rows)]
        merging = [r["log"]["maintain_cpu_seconds"] / r["n"] * 1e6 for r in rows]
        for what, values in ((f"URLSeen {mode}", costs), (f"URLSeen {mode} minus the Bloom filter alone", rest),
                             (f"{mode}: the log's flushes and merges", merging)):
            print(f"{what}: largest / smallest CPU us/URL across sizes = {_ratio(values)}")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.plot is not None and results:
        plot_tenths(args.plot, results, command)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
