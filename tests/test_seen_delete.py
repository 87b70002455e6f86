"""Deletion in the seen-test (`URLSeen.discard`) and the whitelist, in every mode.

Deletion never makes another URL a false negative (Hypothesis over add/discard streams against MemorySeen,
exact and probabilistic, deletable on and off), a discard of a URL never added is refused, the counting
filter survives a clean restart, is rebuilt from the log after a crash and grows by rebuild past its
capacity, and a SIGKILL in the middle of discards loses no committed one. A whitelisted URL that collides
in a tiny, error-prone filter is still reported new.

Real LMDB files, real shared memory; the crash test SIGKILLs a spawned process.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frontier import FrontierError, MemorySeen, URLSeen, fingerprint
from frontier.config import load_config
from frontier.seen.counting import CountingBloom
from frontier.seen.shm import SHM_DIR
from frontier.seen.urlseen import default_bloom_name, read_url_file

SPAWN = multiprocessing.get_context("spawn")
POOL = [f"http://example.com/p/{i}" for i in range(60)]
MODES = {  # (exact, deletable)
    "exact": (True, False),
    "exact-deletable": (True, True),
    "probabilistic-deletable": (False, True),
}


def urls(n: int, host: str = "example.com", start: int = 0) -> list[str]:
    return [f"http://{host}/page/{i}" for i in range(start, start + n)]


def leftover(path: Path) -> bool:
    name = default_bloom_name(path)
    return any(n == name or n.startswith(f"{name}_g") for n in os.listdir(SHM_DIR))


def tiny(path: Path, **kwargs: object) -> URLSeen:
    """A filter so small and loose that false positives are common."""
    options = {"capacity": 20, "error_rate": 0.3, "partitions": 1, "exact": False}
    return URLSeen(path, **{**options, **kwargs})  # type: ignore[arg-type]


def false_positive(seen: URLSeen, members: list[str]) -> str:
    """A URL never added that the Bloom filter says it holds."""
    hit = next((u for u in urls(2000, "probe.example") if u not in members and u in seen.bloom), None)
    assert hit is not None, "the test needs a false positive"
    return hit


# -- deletion never causes a false negative ---------------------------------------------------------

ops = st.lists(st.tuples(st.sampled_from(["add", "discard"]), st.lists(st.sampled_from(POOL), max_size=12)),
               max_size=25)


@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=ops)
def test_random_add_discard_streams_never_make_a_false_negative(mode: str, stream: list) -> None:
    exact, deletable = MODES[mode]
    reference = MemorySeen()
    with tempfile.TemporaryDirectory() as tmp:
        # capacity 16 at 10%: false positives, shared counters and growth by rebuild all happen here
        with URLSeen(Path(tmp) / "seen", capacity=16, error_rate=0.1, partitions=1, exact=exact,
                     deletable=deletable, lru_size=8) as seen:
            held: set[str] = set()  # what the log holds: the URLs reported new and not discarded since
            for op, batch in stream:
                if op == "add":
                    got, want = seen.add_many(batch), reference.add_many(batch)
                    for url, new in zip(batch, got):
                        assert not (new and url in held), f"{url} reported new twice"
                        held.update([url] if new else [])
                else:
                    got, want = seen.discard_many(batch), reference.discard_many(batch)
                    assert [u in held and u not in batch[:i] for i, u in enumerate(batch)] == got
                    held.difference_update(batch)
                if exact:
                    assert got == want  # exact mode is the reference, deletable or not
                # the property: every URL the seen-test holds is seen, whatever was discarded around it
                assert all(u in seen for u in held)
                assert len(seen) == len(held)
                if deletable:  # the counting filter counts exactly the log's URLs, once each
                    assert len(seen.bloom) == len(held)
            assert seen.add_many(sorted(held)) == [False] * len(held)
        assert not leftover(Path(tmp) / "seen")


def test_discarded_urls_are_new_again_and_others_stay_seen(tmp_path: Path) -> None:
    for exact in (True, False):
        with URLSeen(tmp_path / str(exact), capacity=2000, error_rate=1e-4, exact=exact, deletable=True) as seen:
            batch = urls(1000)
            assert seen.add_many(batch) == [True] * 1000
            assert seen.discard_many(batch[::2] + ["http://bad host/"]) == [True] * 500 + [False]
            assert seen.discard(batch[0]) is False  # already gone
            assert len(seen) == 500 and seen.stats()["discarded"] == 500
            assert seen.add_many(batch) == [i % 2 == 0 for i in range(1000)]
            assert seen.bloom.stats()["items"] == 1000


def test_plain_probabilistic_mode_refuses_to_discard(tmp_path: Path) -> None:
    with URLSeen(tmp_path / "seen", capacity=100, exact=False) as seen:
        seen.add("http://example.com/")
        with pytest.raises(FrontierError, match="deletable"):
            seen.discard("http://example.com/")
        assert "http://example.com/" in seen


@pytest.mark.parametrize("mode", MODES)
def test_discarding_a_url_never_added_is_refused_and_hides_nobody(tmp_path: Path, mode: str) -> None:
    exact, deletable = MODES[mode]
    with tiny(tmp_path / "seen", exact=exact, deletable=deletable) as seen:
        members = [u for u, new in zip(urls(20), seen.add_many(urls(20))) if new]
        stranger = false_positive(seen, members)
        before = seen.bloom.stats()
        assert seen.discard(stranger) is False
        assert seen.discard_many([stranger] * 3) == [False] * 3
        assert seen.bloom.stats() == before  # nothing decremented
        assert all(u in seen for u in members) and len(seen) == len(members)
        assert seen.add_many(members) == [False] * len(members)


def test_a_url_confirmed_new_after_a_maybe_is_counted_so_its_discard_hides_nobody(tmp_path: Path) -> None:
    with tiny(tmp_path / "seen", exact=True, deletable=True) as seen:
        members = urls(19)  # 20 with the collider: the filter's capacity, so no growth (which recounts)
        seen.add_many(members)
        collider = false_positive(seen, members)
        assert seen.add(collider) is True  # a Bloom "maybe" the log did not hold: counted as well
        assert len(seen.bloom) == len(seen) == 20
        assert seen.discard(collider) is True
        assert all(u in seen.bloom for u in members)  # its counters were its own to take
        assert seen.add_many(members) == [False] * 19 and len(seen.bloom) == 19


# -- the counting filter across restarts -------------------------------------------------------------


def counters(seen: URLSeen) -> np.ndarray:
    bloom = seen.bloom
    assert isinstance(bloom, CountingBloom)
    return bloom._live().copy()


def test_counting_filter_survives_a_clean_restart(tmp_path: Path) -> None:
    path = tmp_path / "seen"
    with URLSeen(path, capacity=1000, error_rate=1e-3, exact=False, deletable=True) as seen:
        seen.add_many(urls(900))
        seen.discard_many(urls(300))
        saved = counters(seen)
    with URLSeen(path, capacity=1000, error_rate=1e-3, exact=False, deletable=True) as seen:
        assert "rebuilt_items" not in seen.stats()  # the snapshot was loaded, not rebuilt
        assert np.array_equal(counters(seen), saved) and len(seen) == 600
        assert seen.discard_many(urls(900)) == [False] * 300 + [True] * 600
        assert len(seen.bloom) == 0 and not counters(seen).any()  # back to zero: nothing leaked
    # the same dir opened without deletable: its snapshot is not a counting one, the filter is rebuilt
    with URLSeen(path, capacity=1000, error_rate=1e-3, exact=False) as seen:
        assert seen.stats()["rebuilt_items"] == 0


def test_counting_filter_grows_by_rebuild_past_its_capacity(tmp_path: Path) -> None:
    with URLSeen(tmp_path / "seen", capacity=500, error_rate=1e-3, exact=False, deletable=True) as seen:
        for start in range(0, 4000, 250):
            assert seen.add_many(urls(250, start=start)).count(False) <= 5
        stats = seen.stats()
        assert stats["filter_rebuilds"] == 3 and seen.bloom.capacity == 4000  # 500 -> 1000 -> 2000 -> 4000
        assert all(u in seen for u in urls(4000 - stats["trusted_maybe"]) if seen.log.read(
            lambda txn, u=u: seen.log.known(txn, [fingerprint(u)])[0]))
        wrongly_seen = seen.add_many(urls(4000, "fresh.example")).count(False)
        assert wrongly_seen <= 3 * 1e-3 * 4000  # the rate stays near the target (4 expected)


def _discard_and_report(path: str, exact: bool, conn: object) -> None:
    seen = URLSeen(path, capacity=5000, error_rate=1e-4, exact=exact, deletable=True)
    seen.add_many(urls(4000))
    conn.send("added")  # type: ignore[attr-defined]
    for start in range(0, 4000, 20):
        assert seen.discard_many(urls(20, start=start)) == [True] * 20
        conn.send(start + 20)  # type: ignore[attr-defined]
    import time

    time.sleep(120)


@pytest.mark.parametrize("exact", [True, False], ids=["exact", "probabilistic"])
def test_sigkill_during_discards_loses_nothing_committed(tmp_path: Path, exact: bool) -> None:
    path = tmp_path / "seen"
    parent, child = SPAWN.Pipe()
    process = SPAWN.Process(target=_discard_and_report, args=(str(path), exact, child), daemon=True)
    process.start()
    done = 0
    try:
        assert parent.poll(60) and parent.recv() == "added"
        while done < 400:  # killed in the middle of the discards, not after them
            assert parent.poll(60), "the child did not report"
            done = parent.recv()
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.join(30)
    assert process.exitcode == -signal.SIGKILL
    while parent.poll(0):
        done = parent.recv()
    with URLSeen(path, capacity=5000, error_rate=1e-4, exact=exact, deletable=True) as seen:
        assert seen.stats()["rebuilt_items"] == len(seen)  # no snapshot after a kill: rebuilt from the log
        assert done <= 4000 - len(seen) <= done + 20  # every reported discard, and whole batches only
        gone = 4000 - len(seen)
        assert gone % 20 == 0
        assert all(u in seen for u in urls(4000 - gone, start=gone))  # no false negative
        assert seen.discard_many(urls(gone)) == [False] * gone
        assert seen.add_many(urls(gone)) == [True] * gone  # the discarded ones are new again
        assert seen.bloom.stats()["items"] == 4000
    assert not leftover(path)


# -- the whitelist ----------------------------------------------------------------------------------


def test_a_whitelisted_url_that_collides_is_still_new(tmp_path: Path) -> None:
    known = urls(20)
    with tiny(tmp_path / "plain") as seen:
        seen.add_many(known)
        members = [u for u in known if seen.log.read(lambda txn, u=u: seen.log.known(txn, [fingerprint(u)])[0])]
        collider = false_positive(seen, members)
        assert seen.add(collider) is False  # without the whitelist a false positive drops it
    for path, options in ((tmp_path / "listed", {"whitelist": [collider.replace("probe.example", "PROBE.Example:80")]}),
                          (tmp_path / "allowed", {})):
        with tiny(path, **options) as seen:
            if not options:
                seen.allow([collider])  # the way seeds are whitelisted
            assert seen.add_many(known) == [u in members for u in known]  # same filter, same answers
            assert collider not in seen  # the "maybe" is confirmed in the log
            assert seen.add(collider) is True
            assert collider in seen and seen.add(collider) is False
            stats = seen.stats()
            assert stats["false_positives_caught"] == 1 and stats["whitelisted"] == 1


def test_whitelist_from_config(tmp_path: Path) -> None:
    listed = tmp_path / "whitelist.txt"
    listed.write_text("# seeds and known pages\nhttp://Example.com/a\n\n  http://example.com/b  \n")
    assert read_url_file(listed) == ["http://Example.com/a", "http://example.com/b"]
    cfg = load_config({"seeds": ["http://example.com/"],
                       "dedup": {"exact": False, "deletable": True, "whitelist": "whitelist.txt"}}, base_dir=tmp_path)
    assert cfg.dedup.whitelist == listed
    with URLSeen.from_config(cfg, tmp_path / "seen") as seen:
        assert seen.deletable and isinstance(seen.bloom, CountingBloom)
        assert seen.stats()["whitelisted"] == 2
    listed.unlink()
    with pytest.raises(FrontierError, match="whitelist.txt"):
        URLSeen.from_config(cfg, tmp_path / "seen")
