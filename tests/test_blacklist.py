"""Blacklist: the Python API (no false negatives, the false-positive rate, the blocked layout and files of the
standard layout 1, the whitelist, readers in other processes, one writer), the file's states (an interrupted or
killed build says it is incomplete and is refused; truncated, foreign and corrupt files are refused; a full disk
is one DiskFull), and the CLI (`python -m frontier blacklist`: grep-like output, exit codes, gzip and stdin
input, counted bad lines, the progress bar only on a terminal, both layouts)."""

from __future__ import annotations

import gzip
import multiprocessing
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frontier import CanonicalRules, DiskFull, StorageError, VersionMismatch
from frontier.seen.blacklist import _HEAD, COMPLETE, HEADER_SIZE, MAGIC, STANDARD, Blacklist, file_size
from frontier.seen.fingerprint import fingerprints
from frontier.seen.positions import keys, partition_bits, positions, set_bits
from frontier.seen.sizing import BLOCK_BITS, blacklist_parameters, blocked_parameters, bloom_parameters
from frontier.url.canonical import DEFAULT_RULES, canonicalize

SPAWN = multiprocessing.get_context("spawn")


def kill_when_ready(target: Callable[[str, Any], None], path: Path) -> None:
    """Run target(str(path), ready) in a spawned process and SIGKILL it once it sets `ready` (its work under way)."""
    ready = SPAWN.Event()
    child = SPAWN.Process(target=target, args=(str(path), ready))
    child.start()
    assert ready.wait(60), "the child never got ready"
    os.kill(child.pid, signal.SIGKILL)
    child.join(30)
ROOT = Path(__file__).resolve().parent.parent


def urls(n: int, tag: str = "a") -> list[str]:
    return [f"https://www.{tag}{i % 97}.example.com/path/{i}/page.html?id={i}" for i in range(n)]


def build(path: Path, items: list[str], capacity: int = 1000, error_rate: float = 1e-4, **kw) -> None:
    with Blacklist.build(path, capacity, error_rate, **kw) as bl:
        bl.add_many(items)


# -- the Python API -----------------------------------------------------------------------------------


def test_build_add_check_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "bl"
    with Blacklist.build(path, 1000, 1e-6) as bl:
        result = bl.add_many(["http://a.example/x", "HTTP://A.example:80/./x", "ftp://nope/", "", "http://b.example/"])
        assert result == [True, False, False, False, True]
        assert set(result.invalid) == {2, 3}
        assert bl.add("http://c.example/") is True and len(bl) == 3
        assert "http://a.example/x" in bl and "http://A.EXAMPLE/x#frag" in bl and "http://z.example/" not in bl
        assert not bl.complete  # being written
    shape = blacklist_parameters(1000, 1e-6)
    assert path.stat().st_size == file_size(shape) == HEADER_SIZE + shape.blocks * BLOCK_BITS // 8
    sized = blocked_parameters(1000, 0.9e-6)  # sized at 0.9 p, with the blocked formula
    assert (shape.blocks, shape.hashes) == (sized.blocks, sized.hashes) and shape == blacklist_parameters(1000.0, 1e-6)
    assert shape.bits == blacklist_parameters(1000, 1e-6).bits > bloom_parameters(1000, 0.9e-6).bits
    with Blacklist.open(path) as bl:
        assert bl.complete and len(bl) == 3
        found = bl.contains_many(["http://b.example/", "not a url", "http://y.example/", "https://a.example/x"])
        assert found == [True, False, False, False] and set(found.invalid) == {1}
        assert 42 not in bl and "::" not in bl  # never raises
        with pytest.raises(StorageError, match="read-only"):
            bl.add_many(["http://d.example/"])
    with Blacklist.open(path, writable=True) as bl:  # add more later
        assert bl.add_many(["http://d.example/", "http://a.example/x"]) == [True, False]
    with Blacklist.open(path) as bl:
        assert len(bl) == 4 and "http://d.example/" in bl


def test_canonical_true_takes_strings_as_they_are(tmp_path: Path) -> None:
    path = tmp_path / "raw"
    with Blacklist.build(path, 100, 1e-6) as bl:
        assert bl.add_many(["HTTP://Raw.Example/A", "not a url at all"], canonical=True) == [True, True]
        assert bl.contains_many(["HTTP://Raw.Example/A", "not a url at all"], canonical=True) == [True, True]
        assert "HTTP://Raw.Example/A" not in bl  # `in` canonicalises: http://raw.example/A was not added
        with pytest.raises(TypeError, match="batch"):
            bl.add_many("http://example.com/")  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(st.text(min_size=1, max_size=30), max_size=60), min_size=1, max_size=5))
def test_no_false_negatives(tmp_path: Path, batches: list[list[str]]) -> None:
    path = tmp_path / f"nfn{time.monotonic_ns()}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # examples may pass the tiny capacity
        with Blacklist.build(path, 20, 0.05) as bl:
            for batch in batches:
                bl.add_many(batch, canonical=True)
    everything = [u for batch in batches for u in batch]
    with Blacklist.open(path) as bl:
        assert all(bl.contains_many(everything, canonical=True))
    path.unlink()


def build_standard(path: Path, items: list[str], capacity: int, error_rate: float, partitions: int) -> None:
    """A file of layout 1, as frontier wrote them before the blocked layout: a standard filter sized at 0.9 p, its
    positions from frontier.seen.positions over `partitions` partitions of whole words."""
    params = bloom_parameters(capacity, 0.9 * error_rate)
    part_bits = -(-params.bits // (64 * partitions)) * 64
    u8 = np.zeros(part_bits * partitions // 8, dtype=np.uint8)
    fps = fingerprints(list(dict.fromkeys(canonicalize(u) for u in items)))
    set_bits(u8, positions(*keys(fps, partition_bits(partitions)), part_bits, params.hashes))
    head = _HEAD.pack(MAGIC, STANDARD, COMPLETE, capacity, error_rate, part_bits * partitions, part_bits, partitions,
                      params.hashes, len(fps), HEADER_SIZE, DEFAULT_RULES.version_tag().encode())
    path.write_bytes(head.ljust(HEADER_SIZE, b"\0") + u8.tobytes())


@pytest.mark.parametrize("partitions", [None, 1, 8])  # None: built now (blocked); else a file of layout 1
def test_false_positive_rate_at_capacity(tmp_path: Path, partitions: int | None) -> None:
    capacity, target = 20_000, 1e-3
    path = tmp_path / "fp"
    if partitions is None:
        build(path, urls(capacity), capacity, target)
    else:
        build_standard(path, urls(capacity), capacity, target, partitions)
    with Blacklist.open(path) as bl:
        assert bl.layout_version == (2 if partitions is None else 1)
        assert all(bl.contains_many(urls(capacity))) and all(u in bl for u in urls(capacity)[::50])
        probes = urls(200_000, tag="b")
        found = bl.contains_many(probes)
        rate = sum(found) / len(probes)
        assert rate <= target, rate  # sized at 0.9 p: 180 expected, sd 13
        assert [u in bl for u in probes[:5000]] == found[:5000]  # one at a time: the same math
        info = bl.info()
        assert info["count"] >= capacity * (1 - target) and info["state"] == "complete"
        # at capacity a fraction 1 - e^(-kn/m) of the bits is set (half of an optimal standard filter's)
        assert info["fill_ratio"] == pytest.approx(1 - np.exp(-bl.hashes * capacity / bl.bits), abs=0.01)
        assert info["estimated_false_positive_rate"] == pytest.approx(bl.expected_error_rate(), rel=0.3)
        assert info["estimated_false_positive_rate"] <= 1.3 * target
        assert bl.expected_error_rate() <= 0.9 * target * 1.01
        if partitions is None:
            assert info["layout"] == "2 (blocked)" and info["geometry"].startswith(f"{bl.bits // 512:,} blocks")
        else:
            assert info["layout"] == "1 (standard)" and info["geometry"].startswith(f"{partitions} partition(s)")
    if partitions is not None:  # layout 1 stays layout 1 when added to
        with Blacklist.open(path, writable=True) as bl:
            with pytest.warns(RuntimeWarning, match="over its capacity"):
                assert bl.add_many(["http://later.example/"]) == [True]
        with Blacklist.open(path) as bl:
            assert bl.layout_version == 1 and "http://later.example/" in bl and all(bl.contains_many(urls(capacity)))


def test_over_capacity_warns_once(tmp_path: Path) -> None:
    with Blacklist.build(tmp_path / "over", 100, 1e-3) as bl:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            bl.add_many(urls(90))
            assert caught == []
            bl.add_many(urls(200)[90:])
            bl.add_many(urls(300)[200:])
        assert len(caught) == 1 and "over its capacity" in str(caught[0].message)
        assert len(bl) > 250  # refused nothing


def test_version_mismatch_of_the_canonicalisation(tmp_path: Path) -> None:
    build(tmp_path / "bl", urls(10))
    with pytest.raises(VersionMismatch, match="canonicalisation"):
        Blacklist.open(tmp_path / "bl", rules=CanonicalRules(strip_tracking=True))
    every = CanonicalRules(sort_query=True, strip_session_ids=True, strip_tracking=True, keep_fragment=True)
    build(tmp_path / "every", urls(10), rules=every)  # the longest tag fits the header
    with Blacklist.open(tmp_path / "every", rules=every) as bl:
        assert bl.canonical_tag == every.version_tag() and all(bl.contains_many(urls(10)))


# -- the whitelist --------------------------------------------------------------------------------------


def test_allow_hides_known_false_positives_from_every_handle(tmp_path: Path) -> None:
    path = tmp_path / "bl"
    build(path, urls(50), capacity=50, error_rate=0.3)  # a loose filter: false positives are easy to find
    with Blacklist.open(path) as reader, Blacklist.open(path) as other:
        false_positives = [u for u in urls(3000, tag="z") if u in reader][:5]
        assert len(false_positives) == 5
        result = reader.allow(false_positives[:3] + ["bad url", false_positives[0]])
        assert result == [True, True, True, False, False] and set(result.invalid) == {3}
        assert not any(reader.contains_many(false_positives[:3])) and false_positives[3] in reader
        assert not any(x in other for x in false_positives[:3])  # another open handle sees it (reloaded)
        assert all(other.contains_many(urls(50)))  # members stay members
        assert other.allow(false_positives[2:5]) == [False, True, True]
        assert not any(reader.contains_many(false_positives))
        assert reader.info()["allowed"] == 5
    with Blacklist.open(path) as bl:  # persisted beside the filter
        assert not any(x in bl for x in false_positives)
    raw = (tmp_path / "bl.allow").read_bytes()
    assert len(raw) == 16 + 5 * 16
    (tmp_path / "bl.allow").write_bytes(raw[:-3])
    with pytest.raises(StorageError, match="whitelist"):
        Blacklist.open(path)


# -- processes ------------------------------------------------------------------------------------------


def _reader(path: str, items: list[str], out) -> None:
    with Blacklist.open(path) as bl:
        out.put((bl.contains_many(items), len(bl)))


def _writer(path: str, ready, stop) -> None:
    with Blacklist.open(path, writable=True):
        ready.set()
        stop.wait(180)


def test_readers_in_other_processes_and_one_writer(tmp_path: Path) -> None:
    path = tmp_path / "bl"
    build(path, urls(100))
    out = SPAWN.Queue()
    readers = [SPAWN.Process(target=_reader, args=(str(path), urls(100) + urls(5, tag="q"), out)) for _ in range(2)]
    for p in readers:
        p.start()
    for _ in readers:
        flags, count = out.get(timeout=180)  # spawned interpreters start slowly on a loaded machine
        assert flags == [True] * 100 + [False] * 5 and count == 100
    for p in readers:
        p.join(30)

    ready, stop = SPAWN.Event(), SPAWN.Event()
    writer = SPAWN.Process(target=_writer, args=(str(path), ready, stop))
    writer.start()
    try:
        assert ready.wait(180)
        with pytest.raises(StorageError, match="being written by another handle"):
            Blacklist.open(path, writable=True)
        with pytest.raises(StorageError, match="another handle is building or adding"):
            Blacklist.open(path)  # marked incomplete while the add runs
    finally:
        stop.set()
        writer.join(180)
    assert writer.exitcode == 0
    with Blacklist.open(path) as bl:  # the writer closed cleanly: complete again
        assert len(bl) == 100


def _killed_build(path: str, ready) -> None:
    bl = Blacklist.build(path, 10_000, 1e-4)
    bl.add_many(urls(500))
    ready.set()
    time.sleep(600)


def test_a_killed_build_leaves_a_file_that_says_it_is_incomplete(tmp_path: Path) -> None:
    path = tmp_path / "bl"
    kill_when_ready(_killed_build, path)
    with pytest.raises(StorageError, match="incomplete: a build or add was interrupted"):
        Blacklist.open(path)
    with Blacklist.open(path, allow_incomplete=True) as bl:
        assert not bl.complete and bl.info()["state"] == "incomplete"
    with Blacklist.open(path, writable=True, allow_incomplete=True) as bl:  # rerun the input: completes it
        bl.add_many(urls(1000))
    with Blacklist.open(path) as bl:
        assert bl.complete and all(bl.contains_many(urls(1000)))


def test_the_writer_lock_belongs_to_the_handle(tmp_path: Path) -> None:
    """A second writable handle is refused also in the writer's own process, and closing another handle of the
    file does not drop the writer's lock (a POSIX record lock would be dropped)."""
    path = tmp_path / "bl"
    with Blacklist.build(path, 100, 1e-3) as writer:
        Blacklist.open(path, allow_incomplete=True).close()
        with pytest.raises(StorageError, match="being written by another handle"):
            Blacklist.open(path, writable=True, allow_incomplete=True)
        writer.add_many(urls(5))
    with Blacklist.open(path) as bl:
        assert len(bl) == 5


def test_an_exception_inside_with_leaves_the_file_incomplete(tmp_path: Path) -> None:
    path = tmp_path / "bl"
    with pytest.raises(RuntimeError):
        with Blacklist.build(path, 100, 1e-3) as bl:
            bl.add_many(urls(10))
            raise RuntimeError("input went bad")
    with pytest.raises(StorageError, match="incomplete"):
        Blacklist.open(path)


# -- bad files ------------------------------------------------------------------------------------------


def test_missing_foreign_truncated_and_corrupt_files(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="no such file"):
        Blacklist.open(tmp_path / "missing")
    (tmp_path / "foreign").write_bytes(b"hello world\n" * 1000)
    with pytest.raises(StorageError, match="not a frontier blacklist"):
        Blacklist.open(tmp_path / "foreign")
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(StorageError, match="not a frontier blacklist"):
        Blacklist.open(tmp_path / "empty")
    good = tmp_path / "good"
    build(good, urls(10))
    raw = good.read_bytes()
    (tmp_path / "short").write_bytes(raw[:-1])
    with pytest.raises(StorageError, match="truncated"):
        Blacklist.open(tmp_path / "short")
    (tmp_path / "long").write_bytes(raw + b"\0")
    with pytest.raises(StorageError, match="corrupt blacklist"):
        Blacklist.open(tmp_path / "long")
    (tmp_path / "header").write_bytes(raw[:48] + (3).to_bytes(4, "little") + raw[52:])  # 3 blocks: not m bits
    with pytest.raises(StorageError, match="corrupt blacklist header"):
        Blacklist.open(tmp_path / "header")
    with pytest.raises(StorageError, match="exists"):
        Blacklist.build(good, 10, 0.1)


def test_close_is_idempotent_and_handles_do_not_pickle(tmp_path: Path) -> None:
    import pickle

    build(tmp_path / "bl", urls(5))
    bl = Blacklist.open(tmp_path / "bl")
    with pytest.raises(TypeError, match="per process"):
        pickle.dumps(bl)
    bl.close()
    bl.close()
    with pytest.raises(StorageError, match="closed"):
        bl.contains_many(urls(1))
    with pytest.raises(StorageError, match="closed"):
        "http://a.example/" in bl  # noqa: B015


@pytest.fixture
def small_disk(tmp_path: Path):
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root and mount rights): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_full_disk_is_one_diskfull_and_the_file_says_incomplete(small_disk: Path) -> None:
    path = small_disk / "bl"
    with pytest.raises(DiskFull, match="disk is full"):
        Blacklist.build(path, 1_000_000, 1e-4)  # 2.4 MB on a 1 MB disk
    assert path.stat().st_size == HEADER_SIZE  # the space is given back
    with pytest.raises(StorageError, match="incomplete"):
        Blacklist.open(path)
    result = run_cli("blacklist", "check", str(path), "--allow-incomplete", stdin="http://a.example/\n")
    assert result.returncode == 2 and b"truncated" in result.stderr

    small = small_disk / "small"
    build(small, urls(10))
    filler = small_disk / "filler"
    with pytest.raises(OSError):
        with open(filler, "wb") as f:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
    with Blacklist.open(small) as bl:
        with pytest.raises(DiskFull):
            bl.allow([f"http://x.example/{i}" for i in range(1000)])
        assert bl.info()["allowed"] == 0
        assert not (small_disk / "small.allow.tmp").exists()


# -- the CLI ----------------------------------------------------------------------------------------------


def run_cli(*args: str, stdin: str | bytes | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return subprocess.run([sys.executable, "-m", "frontier", *args], input=data if data is not None else b"",
                          capture_output=True, timeout=120, cwd=cwd or ROOT)


def text(b: bytes) -> str:
    return b.decode()


def test_cli_build_check_invert_count_and_exit_codes(tmp_path: Path) -> None:
    bl = str(tmp_path / "bl")
    listed = tmp_path / "listed.txt"
    listed.write_text("http://bad.example/a\n\nnot a url\nHTTP://BAD.example:80/b\nftp://x/\n   \n")
    more = tmp_path / "more.txt.gz"
    with gzip.open(more, "wt") as f:
        f.write("http://bad.example/c\nhttp://bad.example/d")  # no newline at the end
    done = run_cli("blacklist", "build", bl, "--capacity", "1e4", "--error-rate", "1e-6", "--input", str(listed),
                   str(more))
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""
    err = text(done.stderr)
    assert "4 URLs added, 4 new" in err and "skipped 4 lines: 2 empty" in err and "2 not a URL" in err
    assert "Traceback" not in err

    crawl = "http://ok.example/1\nhttp://BAD.example/a#x\nhttp://bad.example/b\r\nnot a url\n\nhttp://ok.example/2"
    done = run_cli("blacklist", "check", bl, stdin=crawl)
    assert done.returncode == 0
    assert done.stdout == b"http://BAD.example/a#x\nhttp://bad.example/b\r\n"  # the lines as read, like grep
    assert "skipped 2 lines: 1 empty" in text(done.stderr) and "1 not a URL" in text(done.stderr)

    done = run_cli("blacklist", "check", bl, "--invert", stdin=crawl)
    assert done.returncode == 0 and done.stdout == b"http://ok.example/1\nhttp://ok.example/2\n"
    done = run_cli("blacklist", "check", bl, "--count", stdin=crawl)
    assert done.returncode == 0 and done.stdout == b"2\n"
    done = run_cli("blacklist", "check", bl, "--count", "--invert", stdin=crawl)
    assert done.stdout == b"2\n"

    done = run_cli("blacklist", "check", bl, stdin="http://ok.example/3\n")
    assert done.returncode == 1 and done.stdout == b"" and done.stderr == b""  # none matched: 1, nothing extra
    done = run_cli("blacklist", "check", bl, "--count", stdin="")
    assert done.returncode == 1 and done.stdout == b"0\n"
    gz = tmp_path / "check.gz"
    gz.write_bytes(gzip.compress(b"http://bad.example/d\n"))
    done = run_cli("blacklist", "check", bl, "--input", "-", str(gz), stdin="http://bad.example/c\n")
    assert done.returncode == 0 and done.stdout == b"http://bad.example/c\nhttp://bad.example/d\n"

    done = run_cli("blacklist", "add", bl, stdin="http://ok.example/3\n")
    assert done.returncode == 0 and "1 new" in text(done.stderr)
    assert run_cli("blacklist", "check", bl, stdin="http://ok.example/3\n").returncode == 0

    info = run_cli("blacklist", "info", bl)
    assert info.returncode == 0
    out = text(info.stdout)
    for field in ("state              complete", "capacity           10,000", "count              5 ",
                  "estimated FP rate", "bytes on disk", "whitelist          0 URLs"):
        assert field in out, out


def test_cli_raw_mode(tmp_path: Path) -> None:
    bl = str(tmp_path / "raw")
    done = run_cli("blacklist", "build", bl, "--capacity", "100", "--error-rate", "1e-6", "--raw",
                   stdin="not a url\nHTTP://X/A\n\n")
    assert done.returncode == 0 and "2 URLs added" in text(done.stderr) and "1 empty" in text(done.stderr)
    done = run_cli("blacklist", "check", bl, "--raw", stdin="not a url\nhttp://x/A\nHTTP://X/A\n")
    assert done.stdout == b"not a url\nHTTP://X/A\n"


def test_cli_info_and_check_name_and_read_both_layouts(tmp_path: Path) -> None:
    members = urls(300)
    build(tmp_path / "new", members)
    build_standard(tmp_path / "old", members, 1000, 1e-4, partitions=2)
    probe = "\n".join(members[:5] + ["http://never.example/"]) + "\n"
    for name, layout_line in [("new", "2 (blocked)"), ("old", "1 (standard)")]:
        info = run_cli("blacklist", "info", str(tmp_path / name))
        assert info.returncode == 0 and re.search(rf"layout\s+{re.escape(layout_line)}", text(info.stdout))
        found = run_cli("blacklist", "check", str(tmp_path / name), "--input", "-", stdin=probe)
        assert found.returncode == 0 and text(found.stdout).split() == members[:5]


def test_cli_allow(tmp_path: Path) -> None:
    bl = str(tmp_path / "bl")
    run_cli("blacklist", "build", bl, "--capacity", "100", "--error-rate", "1e-6", stdin="http://a.example/\n")
    done = run_cli("blacklist", "allow", bl, "http://A.example:80/", "bogus")
    assert done.returncode == 0 and "1 URL allowed, 1 new" in text(done.stderr) and "1 not a URL" in text(done.stderr)
    assert run_cli("blacklist", "check", bl, stdin="http://a.example/\n").returncode == 1
    allow_file = tmp_path / "allow.txt"
    allow_file.write_text("http://b.example/\n")
    assert run_cli("blacklist", "allow", bl, "--input", str(allow_file)).returncode == 0
    assert "whitelist          2 URLs" in text(run_cli("blacklist", "info", bl).stdout)
    assert run_cli("blacklist", "allow", bl).returncode == 2  # neither URLs nor --input


def test_cli_errors_are_one_line_and_status_2(tmp_path: Path) -> None:
    bl = str(tmp_path / "bl")
    foreign = tmp_path / "foreign"
    foreign.write_text("hello\n")
    cases = [
        (["check", str(tmp_path / "missing")], "no such file"),
        (["check", str(foreign)], "not a frontier blacklist"),
        (["build", bl, "--capacity", "0", "--error-rate", "0.1"], "--capacity"),
        (["build", bl, "--capacity", "10", "--error-rate", "2"], "--error-rate"),
        (["build", bl, "--capacity", "ten", "--error-rate", "0.1"], "not a number"),
        (["info", str(foreign)], "not a frontier blacklist"),
    ]
    for args, message in cases:
        done = run_cli("blacklist", *args, stdin="http://a.example/\n")
        assert done.returncode == 2, (args, done.stderr)
        assert message in text(done.stderr) and "Traceback" not in text(done.stderr), (args, done.stderr)

    run_cli("blacklist", "build", bl, "--capacity", "100", "--error-rate", "0.01", stdin="http://a.example/\n")
    corrupt = tmp_path / "corrupt.gz"
    corrupt.write_bytes(gzip.compress(b"http://a.example/\n" * 1000)[:-20])  # truncated gzip
    garbage = tmp_path / "garbage.gz"
    garbage.write_bytes(b"\x1f\x8b" + b"garbage" * 10)
    for path in (corrupt, garbage):
        done = run_cli("blacklist", "check", bl, "--input", str(path))
        assert done.returncode == 2 and "gzip" in text(done.stderr) and "Traceback" not in text(done.stderr)
        lines = text(done.stderr).strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:"), done.stderr
    done = run_cli("blacklist", "check", bl, "--input", str(tmp_path / "nope.txt"))
    assert done.returncode == 2 and "nope.txt" in text(done.stderr)

    # an add that fails on its input leaves the file marked incomplete; check refuses it until completed
    done = run_cli("blacklist", "add", bl, "--input", str(corrupt))
    assert done.returncode == 2
    done = run_cli("blacklist", "check", bl, stdin="http://a.example/\n")
    assert done.returncode == 2 and "incomplete" in text(done.stderr) and "--allow-incomplete" in text(done.stderr)
    assert "incomplete" in text(run_cli("blacklist", "info", bl).stdout)
    assert run_cli("blacklist", "add", bl, "--allow-incomplete", stdin="http://a.example/\n").returncode == 0
    assert run_cli("blacklist", "check", bl, stdin="http://a.example/\n").returncode == 0


def _sigint_default() -> None:
    """In the child: a Ctrl-C as a terminal sends it. Run in the background of a non-interactive shell (a CI
    script's `cmd &`), the test inherits SIGINT ignored, and Python then leaves it ignored in the child."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_cli_interrupted_build_is_marked_incomplete(tmp_path: Path) -> None:
    """SIGINT (exit 130) and SIGKILL in the middle of a build from a pipe: the file says it is incomplete."""
    for sig in (signal.SIGINT, signal.SIGKILL):
        bl = tmp_path / f"bl{sig}"
        proc = subprocess.Popen([sys.executable, "-m", "frontier", "blacklist", "build", str(bl), "--capacity", "1e5",
                                 "--error-rate", "1e-3"], stdin=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                                preexec_fn=_sigint_default)
        proc.stdin.write("".join(u + "\n" for u in urls(30_000)).encode())  # more than one read batch
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # wait until it has added a batch
            if bl.exists() and bl.stat().st_size > HEADER_SIZE and int.from_bytes(bl.read_bytes()[56:64], "little"):
                break
            time.sleep(0.05)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        if sig == signal.SIGINT:
            assert proc.returncode == 130 and b"left marked incomplete" in err, err
        else:
            assert proc.returncode == -signal.SIGKILL
        done = run_cli("blacklist", "check", str(bl), stdin=urls(1)[0] + "\n")
        assert done.returncode == 2 and b"incomplete: a build or add was interrupted" in done.stderr


def test_cli_progress_bar_only_on_a_terminal(tmp_path: Path) -> None:
    urls_file = tmp_path / "urls.txt"
    urls_file.write_text("".join(u + "\n" for u in urls(50_000)))
    bl = str(tmp_path / "bl")
    plain = run_cli("blacklist", "build", bl, "--capacity", "1e5", "--error-rate", "1e-3", "--input", str(urls_file))
    assert plain.returncode == 0
    assert text(plain.stderr).count("\n") == 1 and "lines/s" not in text(plain.stderr)  # the summary only

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "frontier", "blacklist", "check", bl, "--count", "--input",
                             str(urls_file)], stdout=subprocess.PIPE, stderr=slave, cwd=ROOT)
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the terminal closed: the process exited
            break
        if not chunk:
            break
        seen += chunk
    out, _ = proc.communicate(timeout=60)
    os.close(master)
    assert proc.returncode == 0 and out == b"50000\n"
    assert b"lines/s" in seen, seen[-500:]


def test_bench_blacklist_smoke(tmp_path: Path) -> None:
    """`python -m frontier.bench blacklist` runs, prints its tables and targets, and leaves no file behind."""
    done = subprocess.run([sys.executable, "-m", "frontier.bench", "blacklist", "--sizes", "2000,20000",
                           "--repeat", "3", "--skip-counting", "--dir", str(tmp_path)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert out.startswith("command: python -m frontier.bench blacklist --sizes 2000,20000")
    for expected in ("(a) build N URLs", "in each tenth of the build", "extrapolation to 10,000,000,000 URLs",
                     "PASS  0 false negatives", "file size within 3% of params", "each of the 3 builds of each N",
                     "(medians of 3 builds)"):
        assert expected in out, out
    assert os.listdir(tmp_path) == []
