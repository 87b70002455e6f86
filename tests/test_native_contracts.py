"""The C extension's contracts under a hostile page or a careless caller: each test is one hazard.

Some only fail on the old code under the sanitizer build (.ci/sanitize: ASan + UBSan, PYTHONMALLOC=malloc):
the unaligned and overflowing u64 arithmetic, and the borrowed URL strings of block_add_urls. The others fail
(or crash) on any build. Calls that hung before run in a child with a timeout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from frontier.native import NO_NATIVE_ENV, native
from frontier.seen.blacklist import Blacklist
from frontier.seen.bloom import SharedBloom
from frontier.seen.counting import CountingBloom
from frontier.url.canonical import _NATIVE_NAMES, canonicalize_many

_native = pytest.importorskip("frontier._native", reason="the C extension is not built")
pytestmark = pytest.mark.skipif(native() is None, reason=f"{NO_NATIVE_ENV} is set: the numpy path only")

ROOT = Path(__file__).resolve().parents[1]
FLAGS = (True, True, True, False)


def run_child(code: str, timeout: float = 120) -> str:
    """Run code in a fresh interpreter from the worktree root; its stdout (fails on a non-zero exit)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def unaligned(nbytes: int) -> memoryview:
    """A writable buffer of nbytes that starts 1 byte past an aligned address."""
    return memoryview(bytearray(nbytes + 1))[1:]


# -- 1: a long href --------------------------------------------------------------------------------------

def test_a_long_href_costs_no_scratch_memory() -> None:
    """A 10M-character data: href, and a 10M-character http URL: the C side sized 46 bytes of scratch a
    character before deciding (460 MB); now none (refused by its scheme, or past the fast path's length cap),
    and canonicalize_many, Python deciding, stays under 50 MB."""
    out = run_child("""
        import tracemalloc
        from frontier import _native
        from frontier.url.canonical import _NATIVE_NAMES, _base_info, canonicalize_many
        base = "http://example.com/dir/page"
        hrefs = ["data:" + "a" * 10_000_000, "http://example.com/" + "&/" * 5_000_000]
        for href in hrefs:
            tracemalloc.start()
            assert _native.canonicalize([href], (1, 1, 1, 0), _NATIVE_NAMES, _base_info(base)[1]) == ([None], [0])
            print(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
            tracemalloc.start()
            canonicalize_many([href], base)
            print(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
    """)
    c_data, many_data, c_http, many_http = (int(line) for line in out.split())
    assert c_data < 100_000 and c_http < 100_000, out
    assert many_data < 50_000_000 and many_http < 50_000_000, out


def test_a_page_with_a_10m_character_href_costs_under_50_mb() -> None:
    """extract_links, given max_url_length as the fetcher gives it, skips an href past 16 times it unparsed
    (ru_maxrss of a child, before and after)."""
    out = run_child("""
        import resource
        from workers.links import extract_links
        page = b'<html><body><a href="/x">x</a><a href="data:' + b"a" * 10_000_000 + b'">big</a></body></html>'
        small = b'<html><body><a href="/x">x</a><a href="data:' + b"a" * 100 + b'">big</a></body></html>'
        extract_links(small, "http://example.com/", max_url_length=2048)  # warm: imports, the parser
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        batch = extract_links(page, "http://example.com/", max_url_length=2048)  # as the fetcher calls it
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(after - before, len(batch.links), batch.skipped)
    """)
    extra_kb, links, skipped = (int(x) for x in out.split())
    assert (links, skipped) == (1, 1)
    assert extra_kb < 50_000, f"{extra_kb} KB extra"


def test_long_hrefs_are_skipped_and_short_ones_kept() -> None:
    from workers.links import HREF_SLACK, extract_links
    limit = 64
    long_one = "/" + "a" * (HREF_SLACK * limit)
    body = f'<a href="/ok">o</a><a href="{long_one}">l</a><base href="http://other.com/{long_one}">'.encode()
    batch = extract_links(body, "http://example.com/", max_url_length=limit)
    assert batch.links == ("http://example.com/ok",)  # the over-long <base href> is ignored
    assert batch.skipped == 1


# -- 2, 3: size checks that wrapped ---------------------------------------------------------------------

def test_a_4_bit_filter_of_2_62_cells_needs_its_bytes() -> None:
    """(cells * 4 + 7) / 8 wrapped to 0 at 2^62 cells: a 1-byte buffer passed and update wrote past it."""
    with pytest.raises(ValueError, match="smaller than"):
        _native.update(bytes(16), 31, (bytearray(1), 4, 1 << 31, 1), b"\x01")


def test_a_bucket_start_past_the_buffer_is_refused() -> None:
    """starts[slices] * 16 wrapped: 2^60 entries passed for a 16-byte buffer."""
    starts = np.array([0, 1 << 60], dtype=np.uint64)
    with pytest.raises(ValueError, match="buckets: a buffer"):
        _native.block_bucket(bytes(32), 4, (2, 0, bytearray(16), starts, np.zeros(1, dtype=np.uint64)))


# -- 4, 5: input read once -----------------------------------------------------------------------------

def test_sort_unique_reads_its_input_once_while_another_thread_writes_it() -> None:
    """The counting passes read the buffer three times without the GIL: a writer between them overflowed keys[]
    (a SEGV or ASan report). Bounded: 2 s of sorts against a writer."""
    rng = np.random.default_rng(1)
    buf = bytearray(rng.integers(0, 256, size=16 * 50_000, dtype=np.uint8).tobytes())
    stop = threading.Event()

    def write() -> None:
        noise = rng.integers(0, 256, size=(64, 16 * 50_000), dtype=np.uint8)
        for k in range(100_000):
            if stop.is_set():
                return
            buf[:] = noise[k % 64].tobytes()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            out = _native.sort_unique(buf)
            keys = [out[i:i + 16] for i in range(0, len(out), 16)]
            assert keys == sorted(set(keys))
            out = _native.merge_unique([buf, buf])
            assert len(out) % 16 == 0
    finally:
        stop.set()
        writer.join()


def test_update_reads_each_select_entry_once() -> None:
    """select aliases the filter (value 0: an item is chosen while its byte is clear); the items update sets
    bits in the first bytes, so a byte read as chosen turns unchosen 8 items later. Each item is updated as its
    byte read when the loop reached it, as one item at a time would do."""
    rng = np.random.default_rng(2)
    n, part_size, hashes, window = 64, 512, 3, 8
    fps = [bytes(x) for x in rng.integers(0, 256, size=(n, 16), dtype=np.uint8)]
    expected = bytearray(part_size // 8)
    chosen: list[bool] = []
    for i in range(n + window):  # the loop's order: item i - window is written, then item i's select is read
        j = i - window
        if j >= 0 and chosen[j]:
            _native.update(fps[j], 0, (expected, 1, part_size, hashes), b"\x01")
        if i < n:
            chosen.append(expected[i] == 0)
    assert 0 < sum(chosen) < n  # not vacuous: some bytes were set before they were read
    assert any(c and expected[i] != 0 for i, c in enumerate(chosen))  # chosen, then set: the old code skipped it
    buf = bytearray(part_size // 8)
    _native.update(b"".join(fps), 0, (buf, 1, part_size, hashes), memoryview(buf)[:n], 0)
    assert buf == expected


# -- 6, 7: fingerprint sets -----------------------------------------------------------------------------

def test_set_items_does_not_trust_the_header_count() -> None:
    """header[0] == 0 with an entry: the copy went into CPython's shared empty bytes object."""
    table = bytearray(17 * 16)
    table[16 * 3:16 * 4] = b"\x01" * 16
    with pytest.raises(ValueError, match="header counts 0 entries, the table holds 1"):
        _native.set_items(table)
    assert b"" == bytes() and len(b"") == 0


def test_small_fingerprint_sets_never_fill_and_a_full_one_does_not_hang() -> None:
    out = run_child("""
        import os
        from frontier import _native
        fps = [os.urandom(16) for _ in range(3)]
        table = bytearray(3 * 16)  # 2 slots: one entry keeps it half full
        assert _native.set_add(table, fps[0]) == 1
        try:
            _native.set_add(table, fps[1])
        except ValueError:
            print("refused")
        full = bytearray(3 * 16)  # 2 slots, both taken (a caller's bug): probes end
        full[0:8] = (2).to_bytes(8, "little")
        full[16:48] = fps[0] + fps[1]
        print(bytes(_native.set_has(fps[2], [full])).hex(), bytes(_native.set_has(fps[1], [full])).hex())
        try:
            _native.set_add(full, fps[2])
        except ValueError:
            print("full")
        print(bytes(_native.set_remove(full, fps[2])).hex())
    """, timeout=60)
    assert out.split() == ["refused", "00", "01", "full", "00"]


# -- 8: partition bits ------------------------------------------------------------------------------------

def test_32_partition_bits_are_refused_and_31_give_the_partition() -> None:
    fp = b"\xff" * 16
    with pytest.raises(ValueError, match=r"\[0, 31\]"):
        _native.partition_range(fp, 32)
    assert _native.partition_range(fp, 31) == ((1 << 31) - 1, (1 << 31) - 1)


# -- 9: references held across Python code ------------------------------------------------------------------

class Clearing:
    """An int whose __index__ empties a list first (a caller's list changed under a C call)."""

    def __init__(self, value: int, victim: list) -> None:
        self.value, self.victim = value, victim

    def __index__(self) -> int:
        self.victim.clear()
        return self.value


def test_a_filter_list_emptied_while_parsed() -> None:
    """py_test read the list's items after a spec's __index__ had emptied it: a NULL item array (SEGV)."""
    u8 = np.zeros(64, dtype=np.uint8)
    fps = b"".join(os.urandom(16) for _ in range(10))
    filters: list = [(u8, 1, 512, 3)]
    filters += [(u8, 1, 512, Clearing(3, filters)), (u8, 1, 512, 3)]
    assert bytes(_native.test(fps, 0, filters)) == bytes(10)


def test_block_add_urls_holds_its_urls() -> None:
    """The URL list emptied by the filter spec's __index__: its strings were freed, then hashed (ASan:
    heap-use-after-free under the sanitizer build)."""
    urls = [f"http://example.com/{i}" * 3 for i in range(50)]
    buf = bytearray(64 * 8)
    expected = _native.block_add(b"".join(_native.fingerprints(urls)), (bytearray(64 * 8), 8, 7))
    victim = list(urls)
    del urls
    assert _native.block_add_urls(victim, (buf, 8, Clearing(7, victim))) == expected


# -- 10: u64 arithmetic ----------------------------------------------------------------------------------

def test_tally_wraps_unsigned_and_takes_unaligned_counts() -> None:
    """Past 2^63 the count wrapped through signed overflow (UBSan), read through a misaligned int64_t*."""
    counts = unaligned(16)
    counts[0:8] = (2**63 - 1).to_bytes(8, "little")
    fp = b"\x80" + bytes(15)  # partition 1 of 2
    _native.tally(fp * 2, 1, b"\x01\x01", 1, counts, 1)
    assert int.from_bytes(counts[8:16], "little") == 2
    _native.tally(bytes(16), 1, b"\x01", 1, counts, 1)
    assert int.from_bytes(counts[0:8], "little") == 2**63


def test_place_sets_and_buckets_take_unaligned_arrays() -> None:
    caps, counts = unaligned(16), unaligned(16)
    caps[0:16] = (1).to_bytes(8, "little") + (5).to_bytes(8, "little")
    counts[0:16] = bytes(16)
    gens, top = _native.place(os.urandom(16) * 3, 0, b"\x01\x01\x01", counts, bytes(1), caps)
    assert (bytes(gens), top) == (b"\x00\x01\x01", 1)
    table = unaligned(17 * 16)
    fps = b"".join(os.urandom(16) for _ in range(5))
    assert _native.set_add(table, fps) == 5
    assert bytes(_native.set_has(fps, [table])) == b"\x01" * 5
    assert sorted(_native.set_items(table)[i:i + 16] for i in range(0, 80, 16)) == sorted(
        fps[i:i + 16] for i in range(0, 80, 16))
    starts = np.frombuffer(bytearray(17), dtype="<u8", offset=1)  # u64 arrays off their alignment
    fills = np.frombuffer(bytearray(9), dtype="<u8", offset=1)
    starts[:] = (0, 4)
    assert _native.block_bucket(fps[:64], 1, (0, 0, bytearray(64), starts, fills)) == 4
    assert fills.tolist() == [4]


# -- 11: argument errors -----------------------------------------------------------------------------------

def test_a_filter_spec_or_base_that_is_no_tuple_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="a filter is a tuple"):
        _native.test(bytes(16), 0, [[np.zeros(64, dtype=np.uint8), 1, 512, 3]])
    with pytest.raises(TypeError, match="canonicalize base"):
        _native.canonicalize(["/x"], FLAGS, _NATIVE_NAMES, ["http://a.com", "/", None])
    assert canonicalize_many(["/x"], "http://a.com/") == ["http://a.com/x"]


def test_place_takes_255_generations_and_says_so() -> None:
    fp = os.urandom(16)
    gens, top = _native.place(fp, 0, b"\x01", bytes(8 * 255), bytes(1), np.full(255, 1, dtype=np.uint64))
    assert (bytes(gens), top) == (b"\x00", 0)
    with pytest.raises(ValueError, match=r"1\.\.255"):
        _native.place(fp, 0, b"\x01", bytes(8 * 256), bytes(1), np.full(256, 1, dtype=np.uint64))


# -- 12: close while a C call holds the mapping ----------------------------------------------------------

def test_bloom_close_while_a_mapping_is_held_can_be_retried() -> None:
    """A C call holds a buffer of the mapping (here: a held view of it): close raises BufferError and leaves the
    handle open, so a second close, after the call returned, releases it (it did nothing before: a leak)."""
    bloom = SharedBloom.create(10_000, 1e-3, partitions=2)
    try:
        held = memoryview(bloom._gens[0].u8)
        with pytest.raises(BufferError):
            bloom.close()
        held.release()
        bloom.close()
        with pytest.raises(OSError):  # the segment's descriptor is closed: the mapping was released
            os.fstat(bloom._segment._fd)
    finally:
        bloom.unlink()


def test_counting_close_while_a_mapping_is_held_can_be_retried() -> None:
    counting = CountingBloom.create(10_000, 1e-3, partitions=2)
    try:
        held = memoryview(counting._u8)
        with pytest.raises(BufferError):
            counting.close()
        held.release()
        counting.close()
        with pytest.raises(OSError):
            os.fstat(counting._segment._fd)
    finally:
        counting.unlink()


def test_blacklist_close_while_a_mapping_is_held_can_be_retried(tmp_path: Path) -> None:
    """A writable handle: the second close drops the writer lock, so the file opens for writing again."""
    path = tmp_path / "bl"
    bl = Blacklist.build(path, 10_000, 1e-3)
    bl.add_many(["http://example.com/a"])
    held = memoryview(bl._bits)
    with pytest.raises(BufferError):
        bl.close()
    held.release()
    bl.close()
    with Blacklist.open(path, writable=True) as again:
        assert "http://example.com/a" in again
