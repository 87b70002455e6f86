"""`python -m frontier.bench blacklist`: the blacklist at 10^6..10^8 URLs, extrapolated to 10^10; and the counting
filter against the plain one.

(a) For each N of --sizes, in a fresh spawned process (so its RSS is its own): build a Blacklist of capacity N at
--error-rate from N distinct generated URLs through the bulk load `blacklist build` uses (`Blacklist.bulk(memory=
--memory)`, `add_many(batch, canonical=True)` in batches of --batch, hashing included, and its last round at close;
the URLs are canonical, checked on a sample, and canonicalisation is timed apart), close the handle (the flush to
disk timed apart),
reopen it read-only and check N/10 members (drawn with replacement) and N/10 never-added URLs. Reported: false
negatives (must be 0), the false-positive rate against the target, the file size against what
`python -m frontier params` computes for the blacklist (blacklist_parameters: the blocked filter's m/8 bytes at
0.9 p; a standard filter's size is the "std MB" column), the build cost per URL in each tenth of the
build (flat means the cost does not grow as the filter fills or grows), the check costs, and memory: the peak of
the process's private memory (RssAnon, sampled after every batch) and the file pages it had mapped (RssFile: the
page cache of the filter, shared by every process that opens it). Timed: the blacklist calls only (URL
generation is outside).

(b) A CountingBloom and a SharedBloom (the plain filter the seen-test uses), both for 10^6 items at --error-rate:
10^6 adds, then 10^5 of them discarded (the plain filter cannot: it keeps them). Reported: bytes, bits per item,
add and discard rates, the false-positive rate on 10^6 never-added items before and after the deletes, the share
of deleted items still reported present, false negatives among the kept items, saturated counters.

The extrapolation to 10^10 URLs at 1e-4: the file size from the layout `Blacklist.build` would create, the build
time at the per-URL cost measured at the largest N (flat in N: the bulk load's rounds touch the file in order; a
filter over 16x --memory spools, so its build also writes and reads 16 bytes a URL sequentially and passes over
the file once per spool application), the check time (random lookups: they want the whole file in the page
cache), the RAM and the spool disk it wants.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import queue
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from frontier.cli.blacklist import memory_size
from frontier.seen.blacklist import DEFAULT_BULK_MEMORY, SPOOL_FROM
from frontier.seen.fingerprint import FINGERPRINT_SIZE

SPAWN = multiprocessing.get_context("spawn")
DEFAULT_SIZES = "1e6,1e7"
ERROR_RATE = 1e-4
BATCH = 65536
TARGET_N = 10**10
COUNTING_N = 10**6
COUNTING_DELETES = 10**5
CANON_SAMPLE = 100_000
CHILD_TIMEOUT_S = 3600.0
# the targets the benchmark judges
TARGET_FILE = 0.03  # file size within 3% of what `params` computes
TARGET_FLAT = 1.25  # build cost per URL at the largest N <= 1.25x the smallest N's
TARGET_ANON = 1.5  # private memory at the largest N <= 1.5x the smallest N's + the bulk buffer (--memory: bounded)

WORDS = ("news article blog shop store product item page forum thread post video photo music travel sport "
         "health money science tech world local city guide review story event people docs wiki help about "
         "archive index search category tag user profile data report market").split()
TLDS = ("com", "org", "net", "de", "co.uk", "fr", "io", "ru", "jp", "info", "nl", "es")


def _hosts(count: int) -> list[str]:
    n = len(WORDS)
    return [f"{('www.', '', 'm.', 'blog.')[i % 4]}{WORDS[i % n]}{WORDS[(i // n) % n]}{i % 1000}.{TLDS[i % len(TLDS)]}"
            for i in range(count)]


def _paths(count: int) -> list[str]:
    n = len(WORDS)
    return [f"{WORDS[i % n]}/{WORDS[(i * 3 + 1) % n]}/{WORDS[(i * 7) % n]}-{WORDS[(i // n) % n]}-"
            f"{WORDS[(i * 13 + 5) % n]}-{WORDS[(i * 11 + 2) % n]}" for i in range(count)]


HOSTS = _hosts(5003)
PATHS = _paths(1009)


def urls_of(ids) -> list[str]:
    """URL number i, for each i: distinct for distinct i (it ends in "/<i>.html"), canonical, ~80 characters."""
    hosts, paths = HOSTS, PATHS
    nh, np_ = len(hosts), len(paths)
    return [f"https://{hosts[i % nh]}/{paths[(i // 7) % np_]}/{i}.html" for i in ids]


def _rss() -> tuple[int, int]:
    """(RssAnon, RssFile) of this process in bytes."""
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("RssAnon:", "RssFile:")):
                key, value = line.split(":", 1)
                fields[key] = int(value.split()[0]) * 1024
    return fields["RssAnon"], fields["RssFile"]


# -- (a) the blacklist at one size, in its own process --------------------------------------------------


def _one_size(n: int, error_rate: float, batch: int, memory: int, seed: int, directory: str, out) -> None:
    try:
        out.put(("ok", _measure(n, error_rate, batch, memory, seed, directory)))
    except BaseException as e:  # report, do not hang the parent
        out.put(("error", f"{type(e).__name__}: {e}"))


class Clock:
    """Wall and CPU (this thread's) seconds of the calls it times; CPU time is the cost on a busy machine."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def time(self, call, *args, **kwargs):
        wall, cpu = time.perf_counter(), time.thread_time()
        result = call(*args, **kwargs)
        self.wall += time.perf_counter() - wall
        self.cpu += time.thread_time() - cpu
        return result


def _measure(n: int, error_rate: float, batch: int, memory: int, seed: int, directory: str) -> dict:
    from frontier.seen.blacklist import Blacklist
    from frontier.seen.sizing import blacklist_parameters, bloom_parameters
    from frontier.url.canonical import canonicalize

    path = Path(directory) / f"blacklist-{n}"
    sample = urls_of(range(0, n, max(1, n // CANON_SAMPLE)))[:CANON_SAMPLE]
    changed = sum(canonicalize(u) != u for u in sample)
    canon = Clock()
    canon.time(lambda: [canonicalize(u) for u in sample])

    anon_peak, _ = _rss()
    deciles = [0.0] * 10  # CPU seconds
    build, flush = Clock(), Clock()
    with Blacklist.build(path, n, error_rate) as bl:
        load = build.time(bl.bulk, memory=memory)
        for start in range(0, n, batch):
            stop = min(n, start + batch)
            urls = urls_of(range(start, stop))
            before = build.cpu
            build.time(load.add_many, urls, canonical=True)  # a round runs in the call that fills the buffer
            for d in range(start * 10 // n, min(9, (stop - 1) * 10 // n) + 1):  # shared by the tenths it spans
                low, high = max(start, d * n // 10), min(stop, (d + 1) * n // 10)
                deciles[d] += (build.cpu - before) * max(0, high - low) / (stop - start)
            anon_peak = max(anon_peak, _rss()[0])
        before = build.cpu
        build.time(load.close)  # the last round: charged to the last tenth
        deciles[9] += build.cpu - before
        rounds, spool_peak = load.rounds, getattr(load, "spool_peak", 0)
        anon_peak = max(anon_peak, _rss()[0])
        count = len(bl)
        flush.time(bl.close)  # msync of the whole file, then the state marked complete
    file_rss_build = _rss()[1]

    rng = np.random.default_rng(seed)
    checks = max(1, n // 10)
    fn = fp = 0
    member, other = Clock(), Clock()
    with Blacklist.open(path) as bl:
        for start in range(0, checks, batch):
            urls = urls_of(rng.integers(0, n, size=min(batch, checks - start)).tolist())  # no array of N/10 ids
            fn += member.time(bl.contains_many, urls, canonical=True).count(False)
            urls = urls_of(range(n + start, n + min(checks, start + batch)))  # never added: ids >= n
            fp += sum(other.time(bl.contains_many, urls, canonical=True))
            anon_peak = max(anon_peak, _rss()[0])
        info = bl.info()
        file_rss = _rss()[1]
    file_bytes = path.stat().st_size
    path.unlink()
    return {
        "n": n, "count": count, "rounds": rounds, "spool_peak": spool_peak, "build_s": build.wall,
        "build_cpu_s": build.cpu, "flush_s": flush.wall,
        "deciles_us": [deciles[d] / (min(n, (d + 1) * n // 10) - d * n // 10) * 1e6 for d in range(10)],
        "build_us": build.wall / n * 1e6, "build_cpu_us": build.cpu / n * 1e6,
        "member_us": member.wall / checks * 1e6, "member_cpu_us": member.cpu / checks * 1e6,
        "other_us": other.wall / checks * 1e6, "other_cpu_us": other.cpu / checks * 1e6,
        "checks": checks, "fn": fn, "fp": fp, "fp_rate": fp / checks, "file_bytes": file_bytes,
        "params_bytes": blacklist_parameters(n, error_rate).bytes, "std_bytes": bloom_parameters(n, error_rate).bytes,
        "fill": info["fill_ratio"],
        "anon_peak": anon_peak, "file_rss": max(file_rss, file_rss_build),
        "canon_cpu_us": canon.cpu / len(sample) * 1e6,
        "canon_changed": changed, "mean_length": statistics.fmean(map(len, sample)), "maxrss": _maxrss(),
    }


def _maxrss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# -- (b) counting vs plain ---------------------------------------------------------------------------


def _counting(error_rate: float, seed: int, out) -> None:
    try:
        out.put(("ok", _measure_counting(error_rate, seed)))
    except BaseException as e:
        out.put(("error", f"{type(e).__name__}: {e}"))


def _fps(rng: np.random.Generator, n: int) -> list[bytes]:
    raw = rng.bytes(16 * n)
    return [raw[i:i + 16] for i in range(0, 16 * n, 16)]


def _measure_counting(error_rate: float, seed: int) -> list[dict]:
    """The plain filter; the counting filter discarding by the rule (only items whose add returned True); and
    the counting filter discarding, among its 10^5, every item whose add was a false positive (the rule broken)."""
    from frontier.seen.bloom import SharedBloom
    from frontier.seen.counting import CountingBloom

    rng = np.random.default_rng(seed)
    items, probes = _fps(rng, COUNTING_N), _fps(rng, COUNTING_N)
    rows = []
    for name, make, by_rule in (("SharedBloom (plain, cannot delete)", SharedBloom.create, True),
                                ("CountingBloom (4-bit counters)", CountingBloom.create, True),
                                ("CountingBloom, rule broken", CountingBloom.create, False)):
        with make(COUNTING_N, error_rate) as f:
            adds, discards = Clock(), Clock()
            flags = []
            for s in range(0, COUNTING_N, BATCH):
                flags += adds.time(f.add_many, items[s:s + BATCH])
            counted = [x for x, new in zip(items, flags) if new]
            uncounted = {x for x, new in zip(items, flags) if not new}
            # by the rule: counted items only; broken: every uncounted item (add was a false positive) among them
            deleted = counted[:COUNTING_DELETES - (0 if by_rule else len(uncounted))] + ([] if by_rule else
                                                                                           list(uncounted))
            kept = counted[COUNTING_DELETES:]  # counted and not deleted either way
            fp_before = sum(f.contains_many(probes)) / len(probes)
            if isinstance(f, CountingBloom):
                for s in range(0, COUNTING_DELETES, BATCH):
                    discards.time(f.discard_many, deleted[s:s + BATCH])
            stats = f.stats()
            rows.append({
                "name": name, "bytes": f.nbytes, "bits_per_item": f.nbytes * 8 / COUNTING_N,
                "add_rate": COUNTING_N / adds.cpu, "uncounted": len(uncounted),
                "uncounted_deleted": sum(x in uncounted for x in deleted),
                "discard_rate": COUNTING_DELETES / discards.cpu if discards.cpu else None,
                "fp_before": fp_before, "fp_after": sum(f.contains_many(probes)) / len(probes),
                "deleted_present": sum(f.contains_many(deleted)) / len(deleted),
                "fn": f.contains_many(kept).count(False), "saturated": stats.get("saturated_counters"),
            })
    return rows


# -- the run -----------------------------------------------------------------------------------------


def _spooled_run(args: argparse.Namespace, directory: str) -> dict | None:
    """The largest N again with a --memory under 1/SPOOL_FROM of its file, so that it spools; None if even the
    smallest --memory would not (a file under 1 MB)."""
    from frontier.seen.blacklist import MIN_BULK_MEMORY, file_size
    from frontier.seen.sizing import blacklist_parameters

    n = args.sizes[-1]
    memory = file_size(blacklist_parameters(n, args.error_rate)) // (2 * SPOOL_FROM)
    if memory < MIN_BULK_MEMORY:
        return None
    t = time.perf_counter()
    result = _run_child(_one_size, (n, args.error_rate, args.batch, memory, args.seed, directory))
    print(f"  ... N = {n:,} spooled: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    return {**result, "memory": memory}


def _run_child(target, args: tuple) -> object:
    out = SPAWN.Queue()
    proc = SPAWN.Process(target=target, args=(*args, out))
    proc.start()
    try:
        status, value = out.get(timeout=CHILD_TIMEOUT_S)
    except queue.Empty:
        proc.kill()
        raise RuntimeError(f"no result within {CHILD_TIMEOUT_S:.0f} s") from None
    finally:
        proc.join(60)
    if status != "ok":
        raise RuntimeError(value)
    return value


def _table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(head, widths))))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))


def _mb(nbytes: float) -> str:
    return f"{nbytes / 10**6:,.1f}"


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def _interval(hits: int, trials: int) -> str:
    """A rate with its 95% interval (normal approximation of the Poisson count; +-1.96 sqrt(hits))."""
    half = 1.96 * hits ** 0.5
    return f"{hits / trials:.2e} ({max(0.0, hits - half) / trials:.1e}-{(hits + half) / trials:.1e})"


def _target(label: str, ok: bool, detail: str) -> str:
    return f"  {'PASS' if ok else 'MISS'}  {label:<58} {detail}"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m frontier.bench blacklist", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default=DEFAULT_SIZES, help="comma-separated N to build (default %(default)s; 1e8 takes "
                                                          "some minutes)")
    p.add_argument("--error-rate", type=float, default=ERROR_RATE,
                   help="target false-positive rate (default %(default)g)")
    p.add_argument("--batch", type=int, default=BATCH, help="URLs per add_many / contains_many (default %(default)s)")
    p.add_argument("--memory", type=memory_size, default=DEFAULT_BULK_MEMORY,
                   help="the bulk load's buffer, as `blacklist build --memory` (default 256M)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--repeat", type=int, default=1,
                   help="builds of each N, each in a fresh process; its row is the median one (default %(default)s: "
                        "a 10^6 build is 35 ms of work, and one run of it varies by 30%%)")
    p.add_argument("--dir", default=None, help="where the blacklist files go (default: a tmp dir; needs the largest "
                                               "file's size free)")
    p.add_argument("--skip-counting", action="store_true", help="leave out table (b)")
    args = p.parse_args(argv)
    try:
        args.sizes = [int(float(x)) for x in args.sizes.split(",")]
    except ValueError:
        p.error(f"--sizes: not a list of numbers: {args.sizes!r}")
    if any(n < 10 for n in args.sizes) or args.batch < 1 or not 0 < args.error_rate < 1 or args.repeat < 1:
        p.error("--sizes must be >= 10 each, --batch >= 1, --repeat >= 1, --error-rate in (0, 1)")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    from frontier.seen.blacklist import file_size
    from frontier.seen.sizing import blacklist_parameters, bloom_parameters

    print(f"command: {shlex.join(['python', '-m', 'frontier.bench', 'blacklist', *argv])}")
    print(f"machine: {os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}, numpy "
          f"{np.__version__}, RAM {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB, "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    from frontier.native import NO_NATIVE_ENV, implementation

    print(f"path: the filters' batch loops {implementation()} ({NO_NATIVE_ENV}={os.environ.get(NO_NATIVE_ENV, '')!r}; "
          "the spawned measuring processes inherit it)")
    tmp = Path(tempfile.mkdtemp(prefix="frontier-bench-blacklist-", dir=args.dir))
    started = time.perf_counter()
    results, loads = [], []
    try:
        for n in args.sizes:
            t, load = time.perf_counter(), os.getloadavg()[0]
            runs = sorted((_run_child(_one_size, (n, args.error_rate, args.batch, args.memory, args.seed, str(tmp)))
                           for _ in range(args.repeat)), key=lambda r: r["build_cpu_us"])
            results.append({**runs[len(runs) // 2], "repeats": [r["build_cpu_us"] for r in runs]})
            loads.append(f"{load:.1f} -> {os.getloadavg()[0]:.1f}")
            print(f"  ... N = {n:,}: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
        spooled = _spooled_run(args, str(tmp))
        counting = None if args.skip_counting else _run_child(_counting, (args.error_rate, args.seed))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    first = results[0]
    print(f"URLs: generated, canonical ({sum(r['canon_changed'] for r in results)} of the sampled change under "
          f"canonicalize), mean length {first['mean_length']:.0f} characters; error rate {args.error_rate:g}, "
          f"batches of {args.batch:,}, bulk loads of {args.memory:,} bytes; load average before -> after each size: "
          f"{', '.join(loads)}")
    print()
    print(f"(a) build N URLs, then check N/10 members and N/10 never-added URLs (the filter is sized at "
          f"0.9 x {args.error_rate:g}: see frontier/seen/blacklist.py). us/URL: wall / CPU of this process")
    _table(("N", "build s", "flush s", "us/URL build", "rounds", "spool MB", "us/URL check member",
            "us/URL check other", "false neg.", "FP rate (95% interval)", "file MB", "params MB", "file/params",
            "std MB", "RssAnon peak MB", "RssFile MB"),
           [(f"{r['n']:,}" + (" spooled" if r["spool_peak"] else ""), f"{r['build_s']:.1f}", f"{r['flush_s']:.1f}",
             f"{r['build_us']:.3f} / {r['build_cpu_us']:.3f}", str(r["rounds"]), _mb(r["spool_peak"]),
             f"{r['member_us']:.2f} / {r['member_cpu_us']:.2f}", f"{r['other_us']:.2f} / {r['other_cpu_us']:.2f}",
             str(r["fn"]), _interval(r["fp"], r["checks"]), _mb(r["file_bytes"]), _mb(r["params_bytes"]),
             f"{r['file_bytes'] / r['params_bytes']:.4f}", _mb(r["std_bytes"]), _mb(r["anon_peak"]), _mb(r["file_rss"]))
            for r in results + ([spooled] if spooled else [])])
    if spooled:
        print(f"  (spooled: the largest N again with --memory {spooled['memory']:,}, under 1/{SPOOL_FROM} of its file, "
              "so it spools as 10^10 URLs would with the default --memory)")
    print()
    print("build CPU us/URL in each tenth of the build:")
    _table(("N", *[f"{d + 1}/10" for d in range(10)], "max/min"),
           [(f"{r['n']:,}", *[f"{x:.3f}" for x in r["deciles_us"]],
             f"{max(r['deciles_us']) / min(r['deciles_us']):.2f}") for r in results])
    if args.repeat > 1:
        print(f"build CPU us/URL of each of the {args.repeat} builds of each N, ascending (the rows above are the "
              "median ones):")
        for r in results:
            print(f"  {r['n']:>13,}  " + "  ".join(f"{x:.3f}" for x in r["repeats"]))
    canon_us = statistics.fmean(r["canon_cpu_us"] for r in results)
    print(f"canonicalize on these URLs (not in the build time; `blacklist build` applies it unless --raw): "
          f"{canon_us:.2f} CPU us/URL")

    params, standard = blacklist_parameters(TARGET_N, ERROR_RATE), bloom_parameters(TARGET_N, ERROR_RATE)
    spools = file_size(params) > SPOOL_FROM * args.memory
    last = spooled if spools and spooled else results[-1]
    build_s = TARGET_N * last["build_cpu_us"] / 1e6
    check_s = TARGET_N * last["other_cpu_us"] / 1e6
    print()
    print(f"extrapolation to {TARGET_N:,} URLs at {ERROR_RATE:g} (CPU us/URL measured at N = {last['n']:,}, i.e. one "
          "dedicated core):")
    print(f"  file      {file_size(params):,} bytes = {file_size(params) / 10**9:.2f} GB ({params.blocks:,} blocks of "
          f"64 bytes, {params.hashes} hashes); params: {params.bytes:,} bytes "
          f"({file_size(params) / params.bytes - 1:+.2%}); a standard filter at p: {standard.bytes / 10**9:.2f} GB (blocked: "
          f"{params.bytes / standard.bytes - 1:+.1%})")
    spool_bytes = TARGET_N * FINGERPRINT_SIZE
    print(f"  build     {_duration(build_s)} at {last['build_cpu_us']:.3f} us/URL (measured: N = {last['n']:,}"
          f"{' spooled' if last['spool_peak'] else ''}) with canonical input (--raw or pre-canonicalised); "
          f"{_duration(build_s + TARGET_N * canon_us / 1e6)} with canonicalisation; one process"
          + (f"; the file is over {SPOOL_FROM}x --memory, so it spools: {spool_bytes / 10**9:,.0f} GB written and "
             "read back sequentially, and the file read and written once per spool application" if spools else ""))
    print(f"  spool     {spool_bytes / 10**9:,.0f} GB of disk beside the file (16 bytes a URL) if applied once at the "
          f"end; --spool-limit L bounds it to L, for a pass over the {file_size(params) / 10**9:.0f} GB file per "
          "L / 16 URLs"
          if spools else "  spool     none: the file is within 16x --memory")
    print(f"  check     {_duration(check_s)} for 10^10 lookups at {last['other_cpu_us']:.2f} us/URL in one process; "
          "processes share the file's pages, so checkers on more cores divide it")
    print(f"  RAM       build: --memory ({_mb(args.memory)} MB) + about {_mb(min(r['anon_peak'] for r in results))} MB "
          "private; the page cache needs only the segment being applied (about --memory), the bulk load touches the "
          f"file in order. check: the whole file in the page cache ({file_size(params) / 2**30:.1f} GiB) to run at "
          "these rates (each lookup touches one random page: a filter larger than RAM is disk-bound)")

    if counting is not None:
        print()
        print(f"(b) counting vs plain filter for {COUNTING_N:,} items at {args.error_rate:g}: {COUNTING_N:,} adds, "
              f"then {COUNTING_DELETES:,} of them deleted; FP rate on {COUNTING_N:,} never-added fingerprints; "
              "false negatives among the counted items not deleted")
        _table(("filter", "bytes", "bits/item", "adds/CPU s", "discards/CPU s", "FP before", "FP after",
                "deleted still present", "false neg.", "saturated counters"),
               [(r["name"], f"{r['bytes']:,}", f"{r['bits_per_item']:.2f}", f"{r['add_rate']:,.0f}",
                 "-" if r["discard_rate"] is None else f"{r['discard_rate']:,.0f}", f"{r['fp_before']:.2e}",
                 f"{r['fp_after']:.2e}", f"{r['deleted_present']:.2%}", str(r["fn"]),
                 "-" if r["saturated"] is None else str(r["saturated"])) for r in counting])
        broken = counting[2]
        print(f"  {counting[1]['uncounted']} of the {COUNTING_N:,} adds were false positives: reported not new and "
              f"not counted. The rule: discard only items whose add returned True. The last row breaks it: its "
              f"{COUNTING_DELETES:,} discards include those {broken['uncounted_deleted']}, and {broken['fn']} "
              "counted items became false negatives.")

    small, large = results[0], results[-1]
    flat = large["build_cpu_us"] / small["build_cpu_us"]
    flat_wall = large["build_us"] / small["build_us"]
    anon_bound = TARGET_ANON * small["anon_peak"] + args.memory
    print()
    print("targets:")
    print(_target("0 false negatives", all(r["fn"] == 0 for r in results), ", ".join(str(r["fn"]) for r in results)))
    print(_target(f"FP rate <= {args.error_rate:g} at {large['n']:.0e} ({large['checks']:,} never-added URLs)",
                  large["fp_rate"] <= args.error_rate, _interval(large["fp"], large["checks"])))
    print(_target("file size within 3% of params", all(abs(r["file_bytes"] / r["params_bytes"] - 1) <= TARGET_FILE
                                                       for r in results),
                  ", ".join(f"{r['file_bytes'] / r['params_bytes']:.4f}" for r in results)))
    medians = f" (medians of {args.repeat} builds)" if args.repeat > 1 else ""
    print(_target(f"build CPU us/URL at {large['n']:.0e} <= 1.25x at {small['n']:.0e}{medians}", flat <= TARGET_FLAT,
                  f"{flat:.2f}x ({large['build_cpu_us']:.3f} / {small['build_cpu_us']:.3f}); wall {flat_wall:.2f}x "
                  f"({large['build_us']:.3f} / {small['build_us']:.3f})"))
    print(_target(f"RssAnon at {large['n']:.0e} <= 1.5x at {small['n']:.0e} + --memory (bounded)",
                  large["anon_peak"] <= anon_bound, f"{_mb(large['anon_peak'])} <= {_mb(anon_bound)} MB (1.5 x "
                  f"{_mb(small['anon_peak'])} + {_mb(args.memory)})"))
    if counting is not None:
        print(_target("counting filter: 0 false negatives after deletes (by the rule)", counting[1]["fn"] == 0,
                      str(counting[1]["fn"])))
    print(f"done in {time.perf_counter() - started:.0f} s")
    return 0 if all(r["fn"] == 0 for r in results) and (counting is None or counting[1]["fn"] == 0) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
