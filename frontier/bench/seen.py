"""`python -m frontier.bench seen`: check-and-add rate, memory and false positives of the seen-test.

Every row is fed the same seeded crawl-like stream (`frontier.bench.stream`: by default 2,000,000 links,
about 600,000 distinct, repeats by recency and Zipf popularity) in batches of `--batch` (1,000), each run
on a fresh copy of the strings (every link its own str object, as when parsed from a page: no str hash
cached by an earlier run). Timed: the check-and-add loop only (opening, closing and the answers'
bookkeeping are outside), in CPU seconds of the process (time.process_time: other load on the machine
does not count), except the 2-process row (wall time). Rows:

* rbloom, a plain loop `if u in b: ... else: b.add(u)` with its default hash (Python's salted `hash()`):
  the reference of the ratios and of the targets.
* URLSeen exact / probabilistic: `add_many(batch, canonical=True)` in a tmp data dir, capacity =
  distinct URLs of the stream, error rate 1e-4.
* SharedBloom `add_many` on a batch's fingerprints (computed outside the timing), and end to end
  (fingerprints of the strings + add_many) in 1 process and in 2 spawned processes attached to one
  filter, each adding every other batch: aggregate rate over the wall time of both.
* rbloom: its bulk `update()` (insert only), and the plain loop with an xxh3_128 `hash_func` (stable
  across processes, as frontier's fingerprints are).
* Python `set` of URL strings and of xxh3_64 fingerprints, the same plain loop.
* URL shapes: the reference and both URLSeen rows again on streams of short (about 47 bytes, no query) and
  long (about 142, every URL with a query) URLs (`frontier.bench.stream.SHAPES`), each ratio to the reference
  row of its own stream: a per-URL overhead shows most on short URLs, where the reference costs least.
  `--shapes-only` runs just these rows, on all three shapes.
* canonicalisation: `canonicalize` per URL, `canonicalize_many` per batch, and w3lib's
  `canonicalize_url` on non-canonical variants of a sample of the URLs (a fresh variant each run,
  runs interleaved).

The "path" column says which implementation ran: the frontier filters' batch loops in C ("compiled
(frontier._native)", built by `pip install` when a compiler is there) or numpy ("numpy": not built, or
FRONTIER_NO_NATIVE=1, which the header line also shows); rbloom's plain loop stays the reference either way.

False positives: first occurrences reported seen / distinct URLs (exact rows must show 0), and a
probe of never-inserted URLs against each final structure. Memory: Bloom bits (SharedBloom.nbytes,
rbloom size_in_bits) per distinct URL; for URLSeen plus an LRU estimate (tracemalloc), with the LMDB
file on disk per URL apart; for sets tracemalloc of the set and its elements.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import itertools
import math
import multiprocessing as mp
import os
import platform
import pstats
import queue
import resource
import shlex
import shutil
import statistics
import sys
import tempfile
import time
import traceback
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import xxhash

from frontier.bench.stream import (
    SHAPES,
    CrawlStream,
    check_canonical,
    fresh_copy,
    generate,
    materialize,
    mean_length,
    raw_variant,
)
from frontier.native import COMPILED, FALLBACK, NO_NATIVE_ENV, implementation
from frontier.seen.bloom import SharedBloom, expected_bits_per_item
from frontier.seen.fingerprint import fingerprints
from frontier.seen.lru import FingerprintLRU
from frontier.seen.urlseen import URLSeen

DEFAULT_LINKS = 2_000_000
QUICK_LINKS = 200_000
DEFAULT_BATCH = 1000
ERROR_RATE = 1e-4
PROBES = 1_000_000
CANON_SAMPLE = 200_000
RUNS = 3
ROW_BUDGET_S = 300.0  # stop repeating a row once another run would pass this
WORKER_TIMEOUT_S = 1800.0
RBLOOM_PATH = "compiled (Rust)"
CANONICAL_PATHS = {COMPILED: "fast path in C (frontier._native); Python + ada (C++) off it",
                   FALLBACK: "pure Python (+ ada, C++, off the fast path)"}

# the targets (and the memory target), as ratios measured in the same run
REFERENCE = "rbloom plain loop (default hash)"
TARGET_PROBABILISTIC = 1.0  # URLSeen probabilistic >= 1x the reference (2x is the moonshot)
TARGET_EXACT = 0.5  # URLSeen exact >= 0.5x the reference
TARGET_BLOOM_ADD_MANY = 2.0  # SharedBloom.add_many on fingerprints >= 2x the reference
TARGET_BLOOM_BITS = 1.05  # Bloom bits per URL <= 1.05x -ln p / (ln 2)^2
TARGET_CANONICAL = 10.0  # canonicalize >= 10x w3lib canonicalize_url
# on every URL shape (short, medium, long), against the reference on the same stream
TARGET_SHAPE_EXACT = 0.5
TARGET_SHAPE_PROBABILISTIC = 1.5


@dataclass
class Row:
    name: str
    runs: list[float] = field(default_factory=list)  # URLs/s of each run
    bytes_per_url: float | None = None
    bytes_text: str = ""
    fp: float | None = None  # false positives among first occurrences / distinct
    fp_text: str = ""
    probe_fp: float | None = None
    ratio_text: str | None = None  # instead of the ratio to rbloom (canonicalisation rows)
    notes: list[str] = field(default_factory=list)
    exact: bool = False
    path: str = "pure Python"  # the implementation that ran

    @property
    def rate(self) -> float:
        return statistics.median(self.runs) if self.runs else math.nan


class Bench:
    def __init__(self, args: argparse.Namespace, stream: CrawlStream, tmp: Path) -> None:
        self.args = args
        self.s = stream
        self.tmp = tmp
        self.n = len(stream.ids)
        self.d = stream.distinct
        self.rows: list[Row] = []
        self.failures: list[str] = []
        self.segments: list[str] = []  # shared-memory names this run created; none may be left behind

    # -- helpers ------------------------------------------------------------------------------

    def batches(self) -> list[list[str]]:
        """Fresh string objects for one run, cut into batches."""
        urls = materialize(self.s.distinct_urls, self.s.ids)
        b = self.args.batch
        return [urls[i:i + b] for i in range(0, len(urls), b)]

    def repeat(self, row: Row, one_run: Callable[[bool], float]) -> None:
        """Call one_run(evaluate) up to --runs times within --row-budget; it returns the timed seconds.
        The first run (evaluate=True) also measures false positives and memory, outside its timing."""
        started = time.perf_counter()
        for i in range(self.args.runs):
            seconds = one_run(i == 0)
            row.runs.append(self.n / seconds)
            if i + 1 < self.args.runs and time.perf_counter() - started + seconds > self.args.row_budget:
                row.notes.append(f"{len(row.runs)} of {self.args.runs} runs: another would pass the "
                                 f"{self.args.row_budget:.0f} s row budget")
                break

    def check_flags(self, row: Row, results: list[list[bool]]) -> None:
        """First occurrences reported seen are false positives; a repeat reported new is a bug."""
        flags = np.fromiter(itertools.chain.from_iterable(results), dtype=bool, count=self.n)
        first = self.s.first
        fp = int(np.count_nonzero(first & ~flags))
        repeat_new = int(np.count_nonzero(~first & flags))
        row.fp = fp / self.d
        row.fp_text = f"{row.fp:.2e} ({fp})" if fp else "0"
        if repeat_new:
            self.failures.append(f"{row.name}: {repeat_new} repeats reported new")
        if row.exact and fp:
            self.failures.append(f"{row.name}: exact, but {fp} new URLs reported seen")

    def probe(self, row: Row, contains: Callable[[list[str]], int]) -> None:
        hits = contains(self.s.probes)
        row.probe_fp = hits / len(self.s.probes)
        if row.exact and hits:
            self.failures.append(f"{row.name}: exact, but {hits} never-inserted URLs reported seen")

    def bloom_bytes(self, row: Row, nbytes: int, extra: int = 0, extra_what: str = "") -> None:
        row.bytes_per_url = (nbytes + extra) / self.d
        bits = nbytes * 8 / self.d
        row.bytes_text = f"{row.bytes_per_url:.2f}"
        row.notes.append(f"Bloom {bits:.2f} bits/URL = {bits / expected_bits_per_item(ERROR_RATE):.3f}x optimum"
                         + (f"; + {extra_what} {extra / self.d:.2f} B/URL" if extra else ""))

    # -- rows ---------------------------------------------------------------------------------

    def row_urlseen(self, exact: bool) -> Row:
        row = Row(f"URLSeen {'exact' if exact else 'probabilistic'}", exact=exact, path=_implementation())

        def one_run(evaluate: bool) -> float:
            path = Path(tempfile.mkdtemp(prefix="seen-", dir=self.tmp))
            batches = self.batches()
            seen = URLSeen(path, capacity=self.d, error_rate=ERROR_RATE, exact=exact)
            self.segments.append(seen.bloom.name)
            try:
                add_many = seen.add_many
                gc.collect()
                t0 = time.process_time()
                results = [add_many(b, canonical=True) for b in batches]
                seconds = time.process_time() - t0
                if evaluate:
                    self.check_flags(row, results)
                    del results, batches
                    self.probe(row, lambda urls: sum(map(seen.contains_fingerprint, fingerprints(urls))))
                    lru = _lru_bytes(seen._lru.size)
                    self.bloom_bytes(row, seen.bloom.nbytes, lru, f"LRU ({seen._lru.size} entries)")
                    st = seen.stats()
                    row.notes.append(
                        f"LRU hit rate {st['lru_hit_rate']:.1%}; Bloom negative {st['bloom_negative']}, "
                        f"maybe {st['bloom_maybe']}, "
                        + (f"false positives caught in LMDB {st['false_positives_caught']}" if exact
                           else f"maybes trusted {st['trusted_maybe']}")
                        + f"; generations {st['bloom_generations']}")
            finally:
                seen.close()
            if evaluate:
                disk = _disk_bytes(path)
                row.bytes_text += f" (+{disk / self.d:.1f} disk)"
                row.notes.append(f"LMDB on disk {disk / self.d:.1f} B/URL ({disk / 2**20:.0f} MiB)")
            shutil.rmtree(path, ignore_errors=True)
            return seconds

        self.repeat(row, one_run)
        return row

    def row_bloom_add_many(self) -> Row:
        row = Row("SharedBloom add_many (fingerprints given)", path=_implementation())

        def one_run(evaluate: bool) -> float:
            fps = [fingerprints(b) for b in self.batches()]
            with SharedBloom.create(self.d, ERROR_RATE) as bloom:
                self.segments.append(bloom.name)
                add_many = bloom.add_many
                gc.collect()
                t0 = time.process_time()
                results = [add_many(f) for f in fps]
                seconds = time.process_time() - t0
                if evaluate:
                    self.check_flags(row, results)
                    del results
                    self.probe(row, lambda urls: sum(bloom.contains_many(fingerprints(urls))))
                    self.bloom_bytes(row, bloom.nbytes)
            return seconds

        self.repeat(row, one_run)
        return row

    def row_bloom_1(self) -> Row:
        row = Row("SharedBloom, 1 process", path=_implementation())

        def one_run(evaluate: bool) -> float:
            batches = self.batches()
            with SharedBloom.create(self.d, ERROR_RATE) as bloom:
                self.segments.append(bloom.name)
                add_many = bloom.add_many
                gc.collect()
                t0 = time.process_time()
                results = [add_many(fingerprints(b)) for b in batches]
                seconds = time.process_time() - t0
                if evaluate:
                    self.check_flags(row, results)
                    del results
                    self.probe(row, lambda urls: sum(bloom.contains_many(fingerprints(urls))))
                    self.bloom_bytes(row, bloom.nbytes)
                    row.notes.append(f"generations {bloom.generations}")
            return seconds

        self.repeat(row, one_run)
        return row

    def row_bloom_2(self, workers: int = 2) -> Row:
        row = Row(f"SharedBloom, {workers} processes", path=_implementation())
        data = self.tmp / "stream"
        data.mkdir()
        (data / "distinct.txt").write_text("\n".join(self.s.distinct_urls), encoding="utf-8")
        np.save(data / "ids.npy", self.s.ids)
        ctx = mp.get_context("spawn")
        res_q = ctx.Queue()
        barrier = ctx.Barrier(workers)
        cmds = [ctx.Queue() for _ in range(workers)]
        procs = [ctx.Process(target=_bloom_worker, args=(w, workers, str(data), self.args.batch, cmds[w], res_q,
                                                         barrier), daemon=True) for w in range(workers)]
        for p in procs:
            p.start()
        try:
            for _ in range(workers):
                _get(res_q, procs)  # loaded

            def one_run(evaluate: bool) -> float:
                with SharedBloom.create(self.d, ERROR_RATE) as bloom:
                    self.segments.append(bloom.name)
                    for q in cmds:
                        q.put(bloom.name)
                    results = [_get(res_q, procs) for _ in range(workers)]
                    seconds = max(r[3] for r in results) - min(r[2] for r in results)
                    new = sum(r[5] for r in results)
                    if new > self.d:
                        self.failures.append(f"{row.name}: {new} reported new > {self.d} distinct")
                    if evaluate:
                        fp = self.d - new
                        row.fp = fp / self.d
                        row.fp_text = f"{row.fp:.2e} ({fp})" if fp else "0"
                        row.notes.append("FP = distinct - reported new (which occurrence comes first depends on "
                                         "the interleaving)")
                        self.probe(row, lambda urls: sum(bloom.contains_many(fingerprints(urls))))
                        self.bloom_bytes(row, bloom.nbytes)
                    return seconds

            self.repeat(row, one_run)
        finally:
            for q in cmds:
                q.put(None)
            for p in procs:
                p.join(timeout=30)
                if p.is_alive():
                    p.terminate()
                    p.join(timeout=10)
            shutil.rmtree(data, ignore_errors=True)
        return row

    def row_rbloom_update(self) -> Row:
        from rbloom import Bloom

        row = Row("rbloom update() (insert only)", path=RBLOOM_PATH)

        def one_run(evaluate: bool) -> float:
            batches = self.batches()
            bf = Bloom(self.d, ERROR_RATE)
            update = bf.update
            gc.collect()
            t0 = time.process_time()
            for b in batches:
                update(b)
            seconds = time.process_time() - t0
            if evaluate:
                row.fp_text = "n/a (no answer)"
                self.probe(row, lambda urls: sum(u in bf for u in urls))
                self.bloom_bytes(row, bf.size_in_bits // 8)
            return seconds

        self.repeat(row, one_run)
        return row

    def row_check_add(self, name: str, make: Callable[[], object], exact: bool, path: str, key: Callable | None = None,
                      memory: Callable[[object], tuple[int, str]] | None = None) -> Row:
        """Per-item `if x in c: seen else c.add(x)`, x = key(url) or the url itself."""
        row = Row(name, exact=exact, path=path)

        def one_run(evaluate: bool) -> float:
            batches = self.batches()
            c = make()
            gc.collect()
            t0 = time.process_time()
            results = _check_add(c, batches) if key is None else _check_add_key(c, batches, key)
            seconds = time.process_time() - t0
            if evaluate:
                self.check_flags(row, results)
                del results
                if key is None:
                    self.probe(row, lambda urls: sum(u in c for u in urls))
                else:
                    self.probe(row, lambda urls: sum(key(u) in c for u in urls))
                if memory is not None:
                    nbytes, how = memory(c)
                    row.bytes_per_url = nbytes / self.d
                    row.bytes_text = f"{row.bytes_per_url:.{2 if row.bytes_per_url < 10 else 1}f}"
                    row.notes.append(how)
            return seconds

        self.repeat(row, one_run)
        return row

    def row_rbloom_plain(self) -> Row:
        """The reference: rbloom's plain loop with its default hash."""
        from rbloom import Bloom

        return self.row_check_add(REFERENCE, lambda: Bloom(self.d, ERROR_RATE), exact=False, path=RBLOOM_PATH,
                                  memory=self._rbloom_memory)

    def row_rbloom_xxh3(self) -> Row:
        from rbloom import Bloom

        def make():
            return Bloom(self.d, ERROR_RATE, hash_func=_xxh3_signed128)

        return self.row_check_add("rbloom plain loop, xxh3 hash_func", make, exact=False,
                                  path=RBLOOM_PATH + " + xxhash", memory=self._rbloom_memory)

    def _rbloom_memory(self, bf) -> tuple[int, str]:
        bits = bf.size_in_bits
        return bits // 8, (f"Bloom {bits / self.d:.2f} bits/URL = "
                           f"{bits / self.d / expected_bits_per_item(ERROR_RATE):.3f}x optimum")

    def row_sets(self) -> list[Row]:
        def url_memory(_):
            return _traced(lambda: set(materialize(self.s.distinct_urls, np.arange(self.d)))), \
                "tracemalloc: set + its URL strings"

        def fp_memory(_):
            return _traced(lambda: {xxhash.xxh3_64_intdigest(u.encode()) for u in self.s.distinct_urls}), \
                "tracemalloc: set + its int objects"

        return [self.row_check_add("set of URL strings", set, exact=True, path="built-in (C)", memory=url_memory),
                self.row_check_add("set of xxh3_64 ints", set, exact=True, path="built-in (C) + xxhash", key=_xxh3_64,
                                   memory=fp_memory)]

    def rows_canonical(self) -> list[Row]:
        """canonicalize per URL, canonicalize_many per batch, w3lib per URL: runs interleaved, CPU time, each run
        on a fresh non-canonical variant of the same sample (so no string is seen twice)."""
        from w3lib.url import canonicalize_url

        from frontier.url.canonical import canonicalize, canonicalize_many

        k = min(self.args.canon_sample, self.d)
        step = max(1, self.d // k)
        canonical = self.s.distinct_urls[::step][:k]
        batch = self.args.batch
        path = CANONICAL_PATHS[implementation()]
        ours = Row("canonicalize (frontier, per URL)", path=path)
        many = Row(f"canonicalize_many (frontier, batches of {batch:,})", path=path)
        peer = Row("w3lib canonicalize_url", path="pure Python")
        wrong = 0

        def per_url(fn: Callable[[str], str], raw: list[str]) -> None:
            for u in raw:
                fn(u)

        def batched(raw: list[str]) -> None:
            for i in range(0, len(raw), batch):
                canonicalize_many(raw[i:i + batch])

        for run in range(self.args.runs):
            raw = raw_variant(canonical, self.args.seed + 7 + run)
            wrong += sum(c != r for c, r in zip(canonicalize_many(raw), canonical))
            raw = fresh_copy(raw)
            for row, timed in ((ours, lambda: per_url(canonicalize, raw)), (many, lambda: batched(raw)),
                               (peer, lambda: per_url(canonicalize_url, raw))):
                gc.collect()
                t0 = time.process_time()
                timed()
                row.runs.append(k / (time.process_time() - t0))
        if wrong:
            self.failures.append(f"canonicalize: {wrong} raw URLs did not map back to their canonical form")
        for row in (ours, many, peer):
            row.ratio_text = f"{row.rate / peer.rate:.2f}x w3lib"
            row.bytes_text = row.fp_text = "-"
        peer.notes.append(f"{k:,} non-canonical URLs, a fresh variant each run (mixed case, default ports, "
                          f"dot segments, needless escapes, unsorted queries, fragments)"
                          + ("; all map back to their canonical form" if not wrong else ""))
        return [ours, many, peer]


# -- timed loops (module level: no closure lookups in the hot loop) ---------------------------------------

def _check_add(c, batches: list[list[str]]) -> list[list[bool]]:
    out = []
    add = c.add
    for batch in batches:
        flags = []
        app = flags.append
        for u in batch:
            if u in c:
                app(False)
            else:
                add(u)
                app(True)
        out.append(flags)
    return out


def _check_add_key(c, batches: list[list[str]], key) -> list[list[bool]]:
    out = []
    add = c.add
    for batch in batches:
        flags = []
        app = flags.append
        for u in batch:
            x = key(u)
            if x in c:
                app(False)
            else:
                add(x)
                app(True)
        out.append(flags)
    return out


def _implementation() -> str:
    """The path frontier's filters and batch hash take in this process."""
    return implementation()


def _xxh3_signed128(s: str) -> int:
    """rbloom's hash_func contract: a signed 128-bit int."""
    return int.from_bytes(xxhash.xxh3_128_digest(s.encode()), "big", signed=True)


def _xxh3_64(s: str) -> int:
    return xxhash.xxh3_64_intdigest(s.encode())


def _traced(build: Callable[[], object]) -> int:
    """Bytes held by what `build` returns, by tracemalloc (what it freed again is not counted)."""
    gc.collect()
    tracemalloc.start()
    try:
        obj = build()
        gc.collect()
        nbytes = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del obj
    return nbytes


def _lru_bytes(size: int) -> int:
    """tracemalloc of a full FingerprintLRU of `size` 16-byte fingerprints."""
    def build():
        lru = FingerprintLRU(size)
        lru.add_many(i.to_bytes(16, "big") for i in range(size))
        return lru
    return _traced(build)


def _disk_bytes(path: Path) -> int:
    return sum(f.stat().st_blocks * 512 for f in path.iterdir() if f.is_file())


# -- the 2-process SharedBloom worker ----------------------------------------------------------------------

def _bloom_worker(wid: int, workers: int, data: str, batch: int, cmds, results, barrier) -> None:
    """Load the stream, then per command (a filter name): attach, add every `workers`-th batch, report."""
    try:
        distinct = Path(data, "distinct.txt").read_text(encoding="utf-8").split("\n")
        ids = np.load(Path(data, "ids.npy"))
        starts = range(wid * batch, len(ids), workers * batch)
        mine = np.concatenate([ids[s:s + batch] for s in starts]) if len(starts) else ids[:0]
        sizes = [min(batch, len(ids) - s) for s in starts]
        del ids
        results.put(("ready", wid))
        while True:
            name = cmds.get(timeout=WORKER_TIMEOUT_S)
            if name is None:
                return
            urls = materialize(distinct, mine)
            batches, at = [], 0
            for size in sizes:
                batches.append(urls[at:at + size])
                at += size
            del urls
            bloom = SharedBloom.attach(name)
            try:
                add_many = bloom.add_many
                gc.collect()
                barrier.wait(timeout=WORKER_TIMEOUT_S)
                t0 = time.perf_counter()  # CLOCK_MONOTONIC: comparable across processes
                new = 0
                for b in batches:
                    new += add_many(fingerprints(b)).count(True)
                t1 = time.perf_counter()
            finally:
                bloom.close()
            results.put(("ok", wid, t0, t1, sum(sizes), new))
            del batches
    except BaseException:
        results.put(("error", wid, traceback.format_exc()))


def _get(results, procs: list) -> tuple:
    """The next worker message; raise on a worker error or death, never wait forever."""
    deadline = time.monotonic() + WORKER_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            msg = results.get(timeout=2.0)
        except queue.Empty:
            if not all(p.is_alive() for p in procs):
                raise RuntimeError("a SharedBloom worker died") from None
            continue
        if msg[0] == "error":
            raise RuntimeError(f"SharedBloom worker {msg[1]} failed:\n{msg[2]}")
        return msg
    raise RuntimeError("SharedBloom workers timed out")


# -- output -------------------------------------------------------------------------------------------------

def _fmt_rate(rate: float) -> str:
    return "-" if math.isnan(rate) else f"{rate:,.0f}"


def _fp(x: float | None) -> str:
    return "-" if x is None else ("0" if x == 0 else f"{x:.2e}")


def print_table(rows: list[Row], reference: float) -> None:
    head = ("structure", "URLs/s (median)", "runs", "vs reference", "bytes/URL (RAM)", "FP rate (first occ.)",
            "FP rate (unseen probe)", "path")
    lines = []
    for r in rows:
        ratio = r.ratio_text if r.ratio_text is not None else f"{r.rate / reference:.2f}x"
        lines.append((r.name, _fmt_rate(r.rate), str(len(r.runs)), ratio, r.bytes_text or "-",
                      r.fp_text or _fp(r.fp), _fp(r.probe_fp), r.path))
    widths = [max(len(x[i]) for x in [head, *lines]) for i in range(len(head))]
    def fmt(cells):
        return "  ".join(c.ljust(w) if i in (0, len(cells) - 1) else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    print(fmt(head))
    print("  ".join("-" * w for w in widths))
    for line in lines:
        print(fmt(line))


def _target(label: str, value: float, ok: bool, detail: str) -> str:
    return f"  {'PASS' if ok else 'MISS'}  {label:<58} {value:6.2f}   {detail}"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m frontier.bench seen", description=__doc__.split("\n")[0])
    p.add_argument("--links", type=int, default=None, help=f"link occurrences (default {DEFAULT_LINKS:,}; "
                                                           f"--quick: {QUICK_LINKS:,})")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--batch", type=int, default=DEFAULT_BATCH, help="URLs per add_many / batch")
    p.add_argument("--quick", action="store_true", help=f"a smoke test: {QUICK_LINKS:,} links, one run per row, "
                                                        "small samples")
    p.add_argument("--runs", type=int, default=None, help=f"runs per row, median reported (default {RUNS}, "
                                                          "--quick 1)")
    p.add_argument("--row-budget", type=float, default=ROW_BUDGET_S,
                   help="seconds per row after which it is not repeated (default %(default)s)")
    p.add_argument("--probes", type=int, default=None, help=f"never-inserted URLs to probe (default {PROBES:,}, "
                                                            "at most max(links, 100000))")
    p.add_argument("--canon-sample", type=int, default=None, help=f"URLs for the canonicalisation rows "
                                                                  f"(default {CANON_SAMPLE:,}; --quick 20,000)")
    p.add_argument("--shapes-only", action="store_true",
                   help="only the reference and URLSeen rows, on short, medium and long URL streams")
    p.add_argument("--plot", type=Path, default=None, metavar="FILE.svg",
                   help="also draw URLs/s of rbloom and both URLSeen modes on each URL shape (needs matplotlib)")
    p.add_argument("--profile", action="store_true",
                   help="instead of the table: cProfile one run of URLSeen exact and probabilistic, and of "
                        "canonicalize_many")
    args = p.parse_args(argv)
    if args.links is None:
        args.links = QUICK_LINKS if args.quick else DEFAULT_LINKS
    if args.runs is None:
        args.runs = 1 if args.quick else RUNS
    if args.probes is None:
        args.probes = min(PROBES, max(args.links, 100_000))
    if args.canon_sample is None:
        args.canon_sample = 20_000 if args.quick else CANON_SAMPLE
    for name in ("links", "batch", "runs", "probes", "canon_sample"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    args.command = shlex.join(["python", "-m", "frontier.bench", "seen", *argv])
    print(f"command: {args.command}")
    print(f"machine: {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), {platform.machine()}, "
          f"Python {platform.python_version()}, numpy {np.__version__}, load average {_load()}")
    print(f"settings: links {args.links:,}, seed {args.seed}, batch {args.batch}, runs {args.runs}, "
          f"error rate {ERROR_RATE:g}, probes {args.probes:,}")
    print(f"path: frontier's filter kernels {_implementation()} ({NO_NATIVE_ENV}={os.environ.get(NO_NATIVE_ENV, '')!r})")
    tmp = Path(tempfile.mkdtemp(prefix="frontier-bench-"))
    try:
        if args.shapes_only:
            return _run_shapes(args, tmp)
        stream, mean = _stream(args, "medium")
        bench = Bench(args, stream, tmp)
        if args.profile:
            return _profile(bench)
        return _run(bench, args, tmp, mean)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _stream(args: argparse.Namespace, shape: str) -> tuple[CrawlStream, float]:
    """The seeded stream of one URL shape, checked canonical, without its occurrence strings (rows make fresh
    copies), and its mean length in bytes; one line about it printed."""
    t0 = time.perf_counter()
    stream = generate(args.links, args.seed, probes=args.probes, shape=SHAPES[shape])
    gen_s = time.perf_counter() - t0
    changed = check_canonical(stream.urls, 10_000, args.seed)
    mean = mean_length(stream.urls)
    print(f"stream ({shape} URLs): {args.links:,} links, {stream.distinct:,} distinct "
          f"({1 - stream.distinct / args.links:.1%} repeats), mean length {mean:.1f} bytes, "
          f"generated in {gen_s:.1f} s; canonical check: {changed} of {min(10_000, args.links):,} sampled change "
          "under canonicalize")
    if changed:
        raise SystemExit(f"error: the {shape} stream is not canonical")
    stream = CrawlStream([], stream.ids, stream.first, stream.distinct_urls, stream.probes)
    gc.collect()
    return stream, mean


def _shape_rows(bench: Bench, shape: str, mean: float, rows: dict[str, Row] | None = None) -> list[Row]:
    """The reference and both URLSeen rows on one shape's stream (`rows`: ones already run on it), renamed
    "<shape> (<mean> B): <row>", each with its ratio to that stream's reference."""
    rows = rows or {REFERENCE: bench.row_rbloom_plain(), "URLSeen exact": bench.row_urlseen(True),
                    "URLSeen probabilistic": bench.row_urlseen(False)}
    reference = rows[REFERENCE].rate
    out = []
    for name in (REFERENCE, "URLSeen exact", "URLSeen probabilistic"):
        r = rows[name]
        out.append(Row(f"{shape} URLs ({mean:.0f} B): {name}", runs=r.runs, bytes_text=r.bytes_text, fp=r.fp,
                       fp_text=r.fp_text, probe_fp=r.probe_fp, ratio_text=f"{r.rate / reference:.2f}x",
                       exact=r.exact, path=r.path))
    return out


def _shape_targets(rows: list[Row]) -> None:
    """PASS/MISS of the per-shape targets, from the rows of `_shape_rows`."""
    for i in range(0, len(rows), 3):
        ref, exact, prob = rows[i:i + 3]
        shape = ref.name.split(":")[0]
        for row, target in ((exact, TARGET_SHAPE_EXACT), (prob, TARGET_SHAPE_PROBABILISTIC)):
            ratio = row.rate / ref.rate
            label = f"{shape}: {row.name.split(': ')[1]} >= {target:g}x"
            print(_target(label, ratio, ratio >= target, f"{_fmt_rate(row.rate)} / {_fmt_rate(ref.rate)} URLs/s"))


def _plot_shapes(path: Path, rows: list[Row], command: str) -> None:
    """The shape rows of `_shape_rows` as grouped bars: URLs/s per URL shape, rbloom beside both modes."""
    from frontier.bench import plot

    names = (REFERENCE, "URLSeen exact", "URLSeen probabilistic")
    groups = [rows[i].name.split(": ")[0] for i in range(0, len(rows), 3)]
    series = {name: [rows[i + k].rate / 1e6 for i in range(0, len(rows), 3)] for k, name in enumerate(names)}
    plot.bars(path, groups, series, title="The seen-test on three URL shapes (CPU of the loop)",
              ylabel="million URLs per CPU second", command=command)
    print(f"plot: {path}")


def _run_shapes(args: argparse.Namespace, tmp: Path) -> int:
    """`--shapes-only`: the shape rows of all three streams, their targets, and any failure."""
    rows: list[Row] = []
    failures: list[str] = []
    for shape in SHAPES:
        stream, mean = _stream(args, shape)
        bench = Bench(args, stream, tmp)
        rows += _shape_rows(bench, shape, mean)
        failures += bench.failures
        print(f"  ... {shape} URLs done; load average {_load()}", file=sys.stderr, flush=True)
    print()
    print_table(rows, math.nan)
    print()
    print("targets per URL shape (ratios to the reference row of the same stream):")
    _shape_targets(rows)
    print(f"load average {_load()}")
    if args.plot is not None:
        _plot_shapes(args.plot, rows, args.command)
    for f in failures:
        print(f"FAIL: {f}")
    assert not failures, "; ".join(failures)
    return 0


def _run(bench: Bench, args: argparse.Namespace, tmp: Path, mean: float) -> int:
    started = time.perf_counter()
    rows: list[Row] = []
    steps: list[tuple[str, Callable[[], Row | list[Row]]]] = [
        ("rbloom plain loop", bench.row_rbloom_plain),
        ("rbloom xxh3", bench.row_rbloom_xxh3),
        ("rbloom update", bench.row_rbloom_update),
        ("sets", bench.row_sets),
        ("URLSeen exact", lambda: bench.row_urlseen(True)),
        ("URLSeen probabilistic", lambda: bench.row_urlseen(False)),
        ("SharedBloom add_many", bench.row_bloom_add_many),
        ("SharedBloom 1", bench.row_bloom_1),
        ("SharedBloom 2", bench.row_bloom_2),
        ("canonicalisation", bench.rows_canonical),
    ]
    shape_benches = {}
    for shape in ("short", "long"):
        def shape_step(shape: str = shape) -> list[Row]:
            stream, shape_mean = _stream(args, shape)
            shape_benches[shape] = Bench(args, stream, tmp)
            return _shape_rows(shape_benches[shape], shape, shape_mean)
        steps.append((f"{shape} URLs", shape_step))
    loads = []
    for label, step in steps:
        t = time.perf_counter()
        before = os.getloadavg()[0]
        out = step()
        rows.extend(out if isinstance(out, list) else [out])
        loads.append(f"{label} {before:.1f}->{os.getloadavg()[0]:.1f}")
        print(f"  ... {label}: {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
    by = {r.name: r for r in rows}
    canonical_rows = [r for r in rows if r.ratio_text is not None and " URLs (" not in r.name]
    order = ["URLSeen exact", "URLSeen probabilistic", "SharedBloom add_many (fingerprints given)",
             "SharedBloom, 2 processes", "SharedBloom, 1 process", REFERENCE, "rbloom plain loop, xxh3 hash_func",
             "rbloom update() (insert only)", "set of URL strings", "set of xxh3_64 ints"]
    medium = _shape_rows(bench, "medium", mean, by)
    shape_rows = [r for r in rows if r.name.startswith(("short URLs", "long URLs"))]
    shape_rows = shape_rows[:3] + medium + shape_rows[3:]
    rows = [by[name] for name in order] + canonical_rows + shape_rows
    reference = by[REFERENCE].rate
    ours, many, peer = canonical_rows
    for b in shape_benches.values():
        bench.failures += b.failures

    print()
    print_table(rows, reference)
    print()
    print("notes:")
    print(f"  URLs/s are per CPU second of the process running the loop (the 2-process row: per wall second, "
          f"both processes together); ratios are to the reference row, {REFERENCE}.")
    print("  URLSeen rows call add_many(batch, canonical=True): the crawl's workers canonicalise before sending, "
          "so the frontier does not; canonicalisation is timed in its own rows.")
    print("  bytes/URL (RAM) is per distinct URL: Bloom bits (+ LRU for URLSeen); the LMDB log is on disk "
          "(and in the page cache). Timed: the check-and-add loop only, on fresh string objects each run.")
    print("  rbloom's default hash is Python's hash(), salted per process: not usable across processes or "
          "restarts. rbloom update() is insert only (no per-item answer). The plain loop hashes a new URL twice "
          "(in, then add).")
    print(f"  optimum for p = {ERROR_RATE:g}: -ln p/(ln 2)^2 = {expected_bits_per_item(ERROR_RATE):.2f} bits/URL; "
          f"probe = {len(bench.s.probes):,} never-inserted URLs of the same shapes.")
    for r in rows:
        for note in r.notes:
            print(f"  {r.name}: {note}")
    print(f"  1-minute load average before->after each step ({os.cpu_count()} CPUs; above that, other processes "
          f"competed for the cores): {', '.join(loads)}")

    bloom = by["SharedBloom, 1 process"]
    bloom_bits = bloom.bytes_per_url * 8 / expected_bits_per_item(ERROR_RATE)
    add_many = by["SharedBloom add_many (fingerprints given)"]
    print()
    print("targets (ratios measured in this run):")
    for label, row, target in (("URLSeen probabilistic", by["URLSeen probabilistic"], TARGET_PROBABILISTIC),
                               ("URLSeen exact", by["URLSeen exact"], TARGET_EXACT),
                               ("SharedBloom add_many on fingerprints", add_many, TARGET_BLOOM_ADD_MANY)):
        ratio = row.rate / reference
        print(_target(f"{label} >= {target:g}x the reference", ratio, ratio >= target,
                      f"{_fmt_rate(row.rate)} / {_fmt_rate(reference)} URLs/s"))
    print(_target("SharedBloom bits <= 1.05x optimum", bloom_bits, bloom_bits <= TARGET_BLOOM_BITS,
                  f"{bloom.bytes_per_url * 8:.2f} / {expected_bits_per_item(ERROR_RATE):.2f} bits/URL "
                  f"(all generations, filled to capacity)"))
    for label, row in (("canonicalize_many", many), ("canonicalize per URL", ours)):
        ratio = row.rate / peer.rate
        print(_target(f"{label} >= {TARGET_CANONICAL:g}x w3lib", ratio, ratio >= TARGET_CANONICAL,
                      f"{_fmt_rate(row.rate)} / {_fmt_rate(peer.rate)} URLs/s"))
    print("targets per URL shape (ratios to the reference row of the same stream):")
    _shape_targets(shape_rows)
    if args.plot is not None:
        _plot_shapes(args.plot, shape_rows, args.command)
    exact_rows = [r for r in rows if r.exact]
    print("exact rows, false positives: " + ", ".join(
        f"{r.name} {r.fp_text or '-'} / probe {_fp(r.probe_fp)}" for r in exact_rows))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"done in {time.perf_counter() - started:.0f} s; peak RSS of this process {peak:.1f} GiB; "
          f"load average {_load()}")
    left = [n for n in bench.segments if any(p.name == n or p.name.startswith(n + "_g")
                                             for p in Path("/dev/shm").iterdir())]
    if left:
        bench.failures.append(f"shared memory left behind: {left}")
    print(f"shared memory: {len(bench.segments)} filters created, {len(left)} left in /dev/shm")
    for f in bench.failures:
        print(f"FAIL: {f}")
    assert not bench.failures, "; ".join(bench.failures)
    return 0


def _profile(bench: Bench) -> int:
    for exact in (True, False):
        batches = bench.batches()
        path = Path(tempfile.mkdtemp(prefix="profile-", dir=bench.tmp))
        with URLSeen(path, capacity=bench.d, error_rate=ERROR_RATE, exact=exact) as seen:
            prof = cProfile.Profile()
            t0 = time.perf_counter()
            prof.enable()
            for b in batches:
                seen.add_many(b, canonical=True)
            prof.disable()
            seconds = time.perf_counter() - t0
            stats = seen.stats()
        _print_profile(prof, f"URLSeen {'exact' if exact else 'probabilistic'}: {bench.n / seconds:,.0f} URLs/s under "
                             f"cProfile; lru_hit_rate {stats['lru_hit_rate']:.3f}, bloom_maybe {stats['bloom_maybe']}")
        shutil.rmtree(path, ignore_errors=True)
    from frontier.url.canonical import canonicalize_many

    raw = raw_variant(bench.s.distinct_urls[: bench.args.canon_sample], bench.args.seed + 7)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for i in range(0, len(raw), bench.args.batch):
        canonicalize_many(raw[i:i + bench.args.batch])
    prof.disable()
    _print_profile(prof, f"canonicalize_many on {len(raw):,} non-canonical URLs: "
                         f"{len(raw) / (time.perf_counter() - t0):,.0f} URLs/s under cProfile")
    return 0


def _print_profile(prof: cProfile.Profile, title: str) -> None:
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
    print(f"\n=== {title}")
    print(out.getvalue())


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
