"""Blacklist bulk loads (`Blacklist.bulk`, what `blacklist build` and `add` use): the same bits and the same count as
adding one URL at a time, whatever the memory budget (a tiny one forces many rounds) and with a spool on disk (a
filter over 16x the budget); duplicates counted once; the buffered URLs reach the filter at flush/close and are
dropped, leaving the file incomplete, on an error or a kill; the spool is removed on every exit path (after a kill,
by the next load); a full spool disk is one DiskFull; layout 1 files are added to directly; the CLI's --memory,
--spool-dir, --spool-limit. Run on both paths (FRONTIER_NO_NATIVE=1 for numpy)."""

from __future__ import annotations

import random
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from frontier import ConfigError, DiskFull, StorageError
from frontier.fingerprint import fingerprints
from frontier.seen.blacklist import HEADER_SIZE, MIN_BULK_MEMORY, Blacklist
from frontier.seen.blocked import Buckets, positions_one
from test_blacklist import build_standard, kill_when_ready, run_cli, small_disk, urls  # noqa: F401 - a fixture

TINY = MIN_BULK_MEMORY  # 4096 URLs a round
SPOOLED = 400_000  # capacity of a 1.1 MB filter: over 16x TINY, so a TINY load of it spools


def bits_of(path: Path) -> bytes:
    return path.read_bytes()[HEADER_SIZE:]


def one_at_a_time(items: list[str], blocks: int, hashes: int) -> tuple[bytes, int]:
    """The reference: each canonical URL's bits set in input order; counted if one of them was unset."""
    u8 = bytearray(blocks * 64)
    count = 0
    for fp in fingerprints(items):
        fresh = False
        for j in positions_one(fp, blocks, hashes):
            fresh |= not u8[j >> 3] >> (j & 7) & 1
            u8[j >> 3] |= 1 << (j & 7)
        count += fresh
    return bytes(u8), count


def bulk_build(path: Path, batches: list[list[str]], capacity: int, error_rate: float, memory: int,
               **kw: object) -> int:
    """Build in bulk; the rounds it took."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # some builds go past the capacity on purpose
        with Blacklist.build(path, capacity, error_rate) as bl, bl.bulk(memory=memory, **kw) as load:
            for batch in batches:
                load.add_many(batch, canonical=True)
            return load.rounds


@pytest.mark.parametrize("memory", [TINY, 1 << 20, 256 << 20])
def test_bulk_is_exactly_one_at_a_time(tmp_path: Path, memory: int) -> None:
    """A small filter filled 3x past capacity (many URLs whose bits were all set already: a false positive is not
    counted), with repeats within and across batches: the bits and the count of adding one URL at a time."""
    items = urls(6000) + urls(3000) + urls(6000)[::7]
    random.Random(1).shuffle(items)
    path = tmp_path / "bl"
    rounds = bulk_build(path, [items[s:s + 1000] for s in range(0, len(items), 1000)], 2000, 1e-2, memory)
    with Blacklist.open(path) as bl:
        blocks, hashes, count = bl.bits // 512, bl.hashes, len(bl)
    expected_bits, expected_count = one_at_a_time(items, blocks, hashes)
    assert bits_of(path) == expected_bits
    assert count == expected_count and 5000 < count < 6000  # false positives at 3x capacity, repeats never
    assert rounds >= (4 if memory == TINY else 1)


def test_bulk_and_direct_add_many_give_the_same_file(tmp_path: Path) -> None:
    """A realistic load (1% of the capacity's rate, 20% repeats, invalid lines) with a tiny budget: many rounds, the
    same bytes (header included) as `add_many`, and the same invalid URLs reported."""
    items = urls(30_000) + urls(6000, tag="b") + ["not a url", ""] + urls(6000)
    random.Random(2).shuffle(items)
    batches = [items[s:s + 4000] for s in range(0, len(items), 4000)]
    direct, bulk = tmp_path / "direct", tmp_path / "bulk"
    with Blacklist.build(direct, 100_000, 1e-4) as bl:
        direct_invalid = [sorted(bl.add_many(batch).invalid) for batch in batches]
    with Blacklist.build(bulk, 100_000, 1e-4) as bl, bl.bulk(memory=TINY) as load:
        bulk_invalid = [sorted(load.add_many(batch)) for batch in batches]
        assert load.pending > 0
        rounds = load.rounds
    assert rounds >= 9 and bulk_invalid == direct_invalid and sum(map(len, bulk_invalid)) == 2
    assert bulk.read_bytes() == direct.read_bytes()
    with Blacklist.open(bulk) as bl:
        assert len(bl) == 36_000 and all(bl.contains_many(items[:1000] + urls(100, tag="b")))


def test_a_duplicate_heavy_input_counts_each_url_once(tmp_path: Path) -> None:
    distinct = urls(500)
    items = distinct * 40
    random.Random(3).shuffle(items)
    path = tmp_path / "bl"
    rounds = bulk_build(path, [items[s:s + 3000] for s in range(0, len(items), 3000)], 10_000, 1e-4, TINY)
    with Blacklist.open(path) as bl:
        assert len(bl) == 500 and all(bl.contains_many(distinct))
    assert rounds >= 4


def test_buffered_urls_reach_the_filter_at_flush_and_close(tmp_path: Path) -> None:
    path = tmp_path / "bl"
    with Blacklist.build(path, 1000, 1e-4) as bl:
        load = bl.bulk()
        assert load.add_many(["http://a.example/x", "not a url", "http://b.example/"]).keys() == {1}
        assert load.pending == 2 and len(bl) == 0 and "http://a.example/x" not in bl  # buffered: not yet
        load.flush()
        assert load.pending == 0 and len(bl) == 2 and "http://a.example/x" in bl and load.rounds == 1
        load.add_many(["http://c.example/"])
        with pytest.raises(StorageError, match="already open"):
            bl.bulk()
    with Blacklist.open(path) as bl:  # the handle's close ran the load's last round, then marked it complete
        assert bl.complete and len(bl) == 3 and "http://c.example/" in bl
        with pytest.raises(StorageError, match="read-only"):
            bl.bulk()
    with pytest.raises(StorageError, match="closed"):
        load.add_many(["http://d.example/"])


def test_memory_budget_is_validated(tmp_path: Path) -> None:
    with Blacklist.build(tmp_path / "bl", 1000, 1e-4) as bl:
        for bad in (MIN_BULK_MEMORY - 1, 0, -1, 1.5e9):
            with pytest.raises(ConfigError, match="at least"):
                bl.bulk(memory=bad)  # type: ignore[arg-type]
        with bl.bulk(memory=MIN_BULK_MEMORY):
            pass


def test_buckets_stay_within_the_budget() -> None:
    """The buffer never exceeds memory / 16 entries (plus one per slice), nor 1 URL per block; a budget too small for
    512 KiB slices gets larger slices, never empty buckets."""
    for entries, blocks in ((4096, 10**6), (4096, 100), (16 << 20, 4 * 10**6), (10, 3), (1 << 20, 2**32 - 1)):
        b = Buckets(min(entries, blocks), blocks)
        sizes = np.diff(b.starts)
        assert sizes.min() >= 1 and len(b.buffer) // 16 == int(b.starts[-1]) <= min(entries, blocks) + len(sizes)
        assert ((blocks - 1) >> b.shift) + 1 == len(sizes)


def test_an_error_inside_the_load_drops_its_buffer_and_leaves_the_file_incomplete(tmp_path: Path) -> None:
    path = tmp_path / "bl"
    with Blacklist.build(path, 1000, 1e-4) as bl:
        with pytest.raises(RuntimeError):
            with bl.bulk() as load:
                load.add_many(urls(10))
                raise RuntimeError("input went bad")
        assert len(bl) == 0  # dropped, not applied
    with pytest.raises(StorageError, match="incomplete"):  # although the handle was closed cleanly
        Blacklist.open(path)
    with Blacklist.open(path, writable=True, allow_incomplete=True) as bl, bl.bulk() as load:  # rerun: complete
        load.add_many(urls(10))
    with Blacklist.open(path) as bl:
        assert len(bl) == 10


def test_layout_1_files_are_added_to_directly(tmp_path: Path) -> None:
    path = tmp_path / "old"
    build_standard(path, urls(100), 1000, 1e-4, 8)
    with Blacklist.open(path, writable=True) as bl, bl.bulk(memory=TINY) as load:
        assert load.add_many(urls(150) + ["not a url"]).keys() == {150}
        assert load.pending == 0 and len(bl) == 150  # immediate
    with Blacklist.open(path) as bl:
        assert bl.layout_version == 1 and all(bl.contains_many(urls(150)))


def _killed_bulk_load(path: str, ready) -> None:
    with Blacklist.build(path, 100_000, 1e-4) as bl, bl.bulk(memory=TINY) as load:
        load.add_many(urls(20_000))  # several rounds applied, some URLs buffered
        ready.set()
        time.sleep(600)


def test_a_killed_bulk_load_leaves_a_file_that_says_it_is_incomplete(tmp_path: Path) -> None:
    path = tmp_path / "bl"
    kill_when_ready(_killed_bulk_load, path)
    with pytest.raises(StorageError, match="incomplete: a build or add was interrupted"):
        Blacklist.open(path)
    with Blacklist.open(path, allow_incomplete=True) as bl:
        assert 0 < len(bl) < 20_000  # the rounds that ran; the buffer was lost
    with Blacklist.open(path, writable=True, allow_incomplete=True) as bl, bl.bulk() as load:
        load.add_many(urls(20_000))
    with Blacklist.open(path) as bl:
        assert bl.complete and len(bl) == 20_000


def test_cli_memory_option(tmp_path: Path) -> None:
    listing = tmp_path / "urls.txt"
    items = urls(20_000) + urls(5000) + ["not a url"]
    listing.write_text("".join(u + "\n" for u in items))
    for memory in ("64K", "1.5M", "256MiB"):
        done = run_cli("blacklist", "build", str(tmp_path / memory), "--capacity", "3e4", "--error-rate", "1e-4",
                       "--input", str(listing), "--memory", memory)
        assert done.returncode == 0, done.stderr
        assert b"25,000 URLs added, 20,000 new" in done.stderr and b"1 not a URL" in done.stderr
    assert bits_of(tmp_path / "64K") == bits_of(tmp_path / "1.5M") == bits_of(tmp_path / "256MiB")
    done = run_cli("blacklist", "add", str(tmp_path / "64K"), "--input", str(listing), "--memory", "64k")
    assert done.returncode == 0 and b"25,000 URLs added, 0 new" in done.stderr
    for bad in ("1K", "12X", "-5M", ""):
        done = run_cli("blacklist", "build", str(tmp_path / "bad"), "--capacity", "10", "--error-rate", "0.1",
                       "--memory", bad)
        assert done.returncode == 2 and b"--memory" in done.stderr and b"Traceback" not in done.stderr
        assert not (tmp_path / "bad").exists()  # refused before a file is created
    assert b"--memory SIZE" in run_cli("blacklist", "add", "--help").stdout



def spool_dirs(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if ".spool-" in p.name)


@pytest.mark.parametrize("limit", [None, 1 << 17])
def test_a_spooled_load_gives_the_same_file(tmp_path: Path, limit: int | None) -> None:
    """A filter over 16x the memory spools (to --spool-dir), applied at the end or at each limit: the same bytes as
    `add_many`, and the spool is gone after."""
    items = urls(40_000) + urls(10_000) + urls(5000, tag="b")
    random.Random(4).shuffle(items)
    batches = [items[s:s + 5000] for s in range(0, len(items), 5000)]
    direct, bulk, spool = tmp_path / "direct", tmp_path / "bulk", tmp_path / "spool"
    spool.mkdir()
    with Blacklist.build(direct, SPOOLED, 1e-4) as bl:
        for batch in batches:
            bl.add_many(batch)
    with Blacklist.build(bulk, SPOOLED, 1e-4) as bl, bl.bulk(memory=TINY, spool_dir=spool, spool_limit=limit) as load:
        for batch in batches:
            load.add_many(batch)
        assert len(spool_dirs(spool)) == 1 and not spool_dirs(tmp_path)  # beside nothing else
        assert load.pending and len(bl) < 45_000
    assert load.spool_peak > (0 if limit else 40_000 * 16) and load.rounds > 10
    assert bulk.read_bytes() == direct.read_bytes()
    assert not spool_dirs(spool) and not list(spool.iterdir())
    with Blacklist.open(bulk) as bl:
        assert len(bl) == 45_000


def _killed_spooling_load(path: str, ready) -> None:
    with Blacklist.build(path, SPOOLED, 1e-4) as bl, bl.bulk(memory=TINY) as load:
        load.add_many(urls(30_000))  # spilled to the spool beside the file
        ready.set()
        time.sleep(600)


def test_a_killed_spooling_load_leaves_its_spool_to_the_next_load(tmp_path: Path) -> None:
    path = tmp_path / "bl"
    kill_when_ready(_killed_spooling_load, path)
    left = spool_dirs(tmp_path)
    assert len(left) == 1 and list(left[0].iterdir())
    with pytest.raises(StorageError, match="incomplete"):
        Blacklist.open(path)
    done = run_cli("blacklist", "add", str(path), "--allow-incomplete", "--memory", "64K",
                   stdin="".join(u + "\n" for u in urls(30_000)))
    assert done.returncode == 0, done.stderr
    assert f"removed {left[0]}, the spool of an interrupted build or add".encode() in done.stderr
    assert b"30,000 URLs added, 30,000 new" in done.stderr  # the spooled URLs never reached the filter
    assert not spool_dirs(tmp_path)
    with Blacklist.open(path) as bl:
        assert bl.complete and len(bl) == 30_000


def test_a_full_spool_disk_is_one_diskfull_and_the_spool_is_removed(tmp_path: Path, small_disk: Path) -> None:
    path = tmp_path / "bl"
    with pytest.raises(DiskFull, match="the disk is full with .* bytes of bulk-load spool") as caught:
        with Blacklist.build(path, SPOOLED, 1e-4) as bl, bl.bulk(memory=TINY, spool_dir=small_disk) as load:
            for start in range(0, 100_000, 10_000):  # 1.6 MB of spool on a 1 MB disk
                load.add_many(urls(10_000, tag=f"t{start}"))
    assert "\n" not in str(caught.value)
    assert list(small_disk.iterdir()) == []
    with pytest.raises(StorageError, match="incomplete"):
        Blacklist.open(path)
    done = run_cli("blacklist", "build", str(tmp_path / "cli"), "--capacity", str(SPOOLED), "--error-rate", "1e-4",
                   "--memory", "64K", "--spool-dir", str(small_disk),
                   stdin="".join(u + "\n" for u in urls(100_000)))
    assert done.returncode == 2 and done.stderr.count(b"\n") == 1 and b"disk is full" in done.stderr, done.stderr
    assert list(small_disk.iterdir()) == []


def test_spool_options_are_validated(tmp_path: Path) -> None:
    with Blacklist.build(tmp_path / "bl", SPOOLED, 1e-4) as bl:
        with pytest.raises(ConfigError, match="spool limit"):
            bl.bulk(memory=TINY, spool_limit=100)
        with pytest.raises(StorageError, match="does not exist"):
            bl.bulk(memory=TINY, spool_dir=tmp_path / "missing")
    done = run_cli("blacklist", "build", str(tmp_path / "cli"), "--capacity", "10", "--error-rate", "0.1",
                   "--spool-dir", str(tmp_path / "missing"))
    assert done.returncode == 2 and b"not a directory" in done.stderr and not (tmp_path / "cli").exists()
    done = run_cli("blacklist", "add", str(tmp_path / "bl"), "--spool-dir", str(tmp_path / "missing"))
    assert done.returncode == 2 and b"not a directory" in done.stderr
    with Blacklist.open(tmp_path / "bl") as bl:  # still complete: refused before it was opened for writing
        assert bl.complete
