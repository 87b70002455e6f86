"""Recrawl in the crawl state: `Link.recrawl`, `recrawl_after`, the spool files, and seeds that
a Bloom false positive must not drop (item 5). The command and real crawls: tests/test_recrawl_cli.py."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from frontier.config import DedupConfig, load_config
from frontier.crawl.scheduler import Frontier
from frontier.seen.fingerprint import fingerprint
from frontier.seen.fplog import FingerprintLog
from frontier.state.base import Ack, Commit, CrawlState, Link, Outcome, StatePolicy
from frontier.state.lmdb import LmdbCrawlState
from frontier.state.recrawl_spool import pending_spool, spool_dir, write_spool
from frontier.state.recrawl_spool import pending_spool, spool_dir, write_spool
from test_state_contract import NO_ROBOTS, T0, Open, lease_all, open_state  # noqa: F401 - a fixture

A, B, C = "http://a.test/1", "http://a.test/2", "http://b.test/3"


def finish(state: CrawlState, now: float) -> list[str]:
    """Lease everything leasable and ack it done (fetched); the URLs."""
    leases = lease_all(state, now)
    state.commit(Commit(acks=[Ack(key=lease.key, outcome=Outcome.DONE, fetched=True) for lease in leases]), now)
    return sorted(lease.url for lease in leases)


def recrawl(*urls: str) -> list[Link]:
    return [Link(url, 0, recrawl=True) for url in urls]


# -- Link.recrawl, on every backend ---------------------------------------------------------------------------


def test_recrawl_queues_a_done_url_once_and_leaves_a_queued_one(open_state: Open) -> None:
    state = open_state()
    state.commit(Commit(links=[Link(A, 0), Link(B, 1)]), T0)
    assert finish(state, T0) == [A, B]
    assert state.done(T0 + 1)
    # A done: queued again; C never seen: new like a seed; repeats in the batch count once
    assert state.commit(Commit(links=recrawl(A, C, A)), T0 + 2).new == [True, True, False]
    # while queued again, neither a recrawl nor a plain link queues it a second time
    assert state.commit(Commit(links=[*recrawl(A, C), Link(A, 3)]), T0 + 3).new == [False, False, False]
    assert state.stats().queued == 2
    assert finish(state, T0 + 4) == [A, C]
    assert state.done(T0 + 5)
    # a plain link to a done URL does nothing without recrawl_after
    assert state.commit(Commit(links=[Link(A, 1), Link(B, 1)]), T0 + 6).new == [False, False]
    assert state.done(T0 + 7)


def test_recrawl_of_a_leased_url_does_not_queue_it_twice(open_state: Open) -> None:
    state = open_state()
    state.commit(Commit(links=[Link(A, 0)]), T0)
    (lease,) = lease_all(state, T0)
    assert state.commit(Commit(links=recrawl(A)), T0 + 1).new == [False]
    state.commit(Commit(acks=[Ack(key=lease.key, outcome=Outcome.DONE, fetched=True)]), T0 + 2)
    assert state.done(T0 + 3)


def test_recrawl_after_queues_a_stale_page_once_for_many_links(open_state: Open) -> None:
    after = 100.0
    state = open_state(StatePolicy(lease_timeout=10.0, obey_robots=False, recrawl_after=after))
    state.commit(Commit(links=[Link(A, 0)]), T0)
    assert finish(state, T0) == [A]
    # fetched at T0: fresh until T0 + after
    assert state.commit(Commit(links=[Link(A, 2)]), T0 + after - 1).new == [False]
    assert state.done(T0 + after - 1)
    # stale: the first link queues it, the next 1,000 (one commit each, and repeats in one) do not
    assert state.commit(Commit(links=[Link(A, 2), Link(A, 3)]), T0 + after).new == [True, False]
    for i in range(1000):
        assert state.commit(Commit(links=[Link(A, 2)]), T0 + after + i / 1000).new == [False]
    assert state.stats().queued == 1
    # the refetch counts from its own time
    assert finish(state, T0 + 2 * after) == [A]
    assert state.commit(Commit(links=[Link(A, 2)]), T0 + 3 * after - 1).new == [False]
    assert state.commit(Commit(links=[Link(A, 2)]), T0 + 3 * after).new == [True]


def test_recrawl_after_survives_reopening(open_state: Open) -> None:
    """The fetch time is committed with the ack, the requeue with the link: both hold after a reopen."""
    policy = StatePolicy(lease_timeout=10.0, obey_robots=False, recrawl_after=50.0)
    state = open_state(policy)
    state.commit(Commit(links=[Link(A, 0), Link(B, 0)]), T0)
    finish(state, T0)
    state.close()
    state = open_state(policy, T0 + 60)
    assert state.commit(Commit(links=[Link(A, 1)]), T0 + 60).new == [True]
    state.close()
    state = open_state(policy, T0 + 61)
    assert state.commit(Commit(links=[Link(A, 1)]), T0 + 61).new == [False]  # queued already
    assert finish(state, T0 + 62) == [A]
    assert state.commit(Commit(links=[Link(A, 1), Link(B, 1)]), T0 + 63).new == [False, True]


def test_recrawl_after_counts_from_a_refusal_or_a_give_up(open_state: Open) -> None:
    """A page dropped (robots.txt) or given up after its retries (an expiry) left the queue at that time."""
    after = 100.0
    state = open_state(StatePolicy(lease_timeout=10.0, max_retries=0, obey_robots=False, recrawl_after=after))
    state.commit(Commit(links=[Link(A, 1), Link(C, 1)]), T0)
    a, c = sorted(lease_all(state, T0), key=lambda lease: lease.url)
    state.commit(Commit(acks=[Ack(key=a.key, outcome=Outcome.DROP)]), T0 + 5)
    assert [e.requeued for e in state.expire(T0 + 11)] == [False]  # c: its one attempt expired
    assert state.commit(Commit(links=[Link(A, 2), Link(C, 2)]), T0 + 5 + after - 1).new == [False, False]
    assert state.commit(Commit(links=[Link(A, 2), Link(C, 2)]), T0 + 5 + after).new == [True, False]
    assert state.commit(Commit(links=[Link(A, 2), Link(C, 2)]), T0 + 11 + after).new == [False, True]
    assert finish(state, T0 + 12 + after) == [A, C]


def test_recrawl_after_leaves_a_url_a_forced_link_queued(open_state: Open) -> None:
    """A forced link queues a done URL again: while that entry is queued, a stale link does not add another."""
    after = 100.0
    state = open_state(StatePolicy(lease_timeout=10.0, obey_robots=False, recrawl_after=after))
    state.commit(Commit(links=[Link(A, 0)]), T0)
    finish(state, T0)
    assert state.commit(Commit(links=[Link(A, 1, force=True)]), T0 + after).new == [True]
    assert state.commit(Commit(links=[Link(A, 1)]), T0 + after).new == [False]
    assert finish(state, T0 + after) == [A]
    assert state.commit(Commit(links=[Link(A, 1)]), T0 + 2 * after - 1).new == [False]
    assert state.commit(Commit(links=[Link(A, 1)]), T0 + 2 * after).new == [True]


def test_given_up_pages_are_done_too(open_state: Open) -> None:
    """A page dropped (robots.txt) or given up after its retries left the queue for good: a recrawl queues it."""
    state = open_state(StatePolicy(lease_timeout=10.0, max_retries=0, obey_robots=False))
    state.commit(Commit(links=[Link(A, 1), Link(B, 1)]), T0)
    a, b = sorted(lease_all(state, T0), key=lambda lease: lease.url)
    state.commit(Commit(acks=[Ack(key=a.key, outcome=Outcome.DROP)]), T0)
    assert [e.requeued for e in state.expire(T0 + 11)] == [False]  # b: its one attempt expired
    assert state.done(T0 + 12)
    assert state.commit(Commit(links=recrawl(A, B)), T0 + 12).new == [True, True]


# -- spool files (LMDB) ---------------------------------------------------------------------------------------


def open_lmdb(where: Path, **dedup: object) -> LmdbCrawlState:
    return LmdbCrawlState(where, NO_ROBOTS, dedup=DedupConfig(capacity=10_000, **dedup), now=T0)


def test_spool_is_applied_at_open_and_while_running(tmp_path: Path) -> None:
    where = tmp_path / "crawl"
    with open_lmdb(where) as state:
        state.commit(Commit(links=[Link(A, 0), Link(B, 0)]), T0)
        finish(state, T0)
    write_spool(where, [A, C])
    with open_lmdb(where) as state:
        assert pending_spool(where) == []  # applied at open
        assert state.stats().queued == 2
        write_spool(where, [B, C])  # B done, C queued
        assert state.apply_recrawls(T0 + 1) == 1
        assert finish(state, T0 + 1) == [A, B, C]
        assert state.done(T0 + 2)
        assert state.seen_stats()["recrawled"] == 2  # A, B (C was new)
        write_spool(where, [C])  # while running: lease() looks for spool files once a second
        deadline = time.monotonic() + 5
        while not (leases := lease_all(state, T0 + 3)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [lease.url for lease in leases] == [C]
    assert pending_spool(where) == [] and list(spool_dir(where).iterdir()) == []


def test_spool_crash_between_commit_and_delete_applies_nothing_twice(tmp_path: Path) -> None:
    """The states a kill -9 can leave: the file applied but not deleted; deleted but its record kept."""
    where = tmp_path / "crawl"
    with open_lmdb(where) as state:
        state.commit(Commit(links=[Link(A, 0)]), T0)
        finish(state, T0)
    (path,) = write_spool(where, [A, C])
    kept = tmp_path / "kept"
    shutil.copy(path, kept)
    with open_lmdb(where) as state:
        assert finish(state, T0 + 1) == [A, C]
        # as if killed after the commit (it recorded the name), before the file's delete
        state.seen.log.write(lambda txn: state._store.mark_applied(txn, path.name, T0))
    shutil.copy(kept, path)
    with open_lmdb(where) as state:
        assert state.stats().queued == 0, "a spool file was applied twice"
        assert not path.exists()
        assert state._store.applied_names() == []
    # killed after the delete, before the record's delete: the record goes at the next open
    with open_lmdb(where) as state:
        state.seen.log.write(lambda txn: state._store.mark_applied(txn, path.name, T0))
    with open_lmdb(where) as state:
        assert state._store.applied_names() == []
    # a file not written by `recrawl` is set aside, not applied, not looked at again
    stray = spool_dir(where) / "99999999999999999999-1-00000.urls"
    stray.write_text(A + "\n")
    with open_lmdb(where) as state:
        assert state.stats().queued == 0
    assert not stray.exists() and stray.with_name(f".{stray.name}.rejected").exists()


class PowerLoss:
    """What a power loss would leave, simulated: LMDB's data.mdb as of its last sync (a copy taken after each
    `FingerprintLog.sync`; with storage.fsync true each commit is synced, so the file as it is) and the spool
    directory's entries as of its last fsync (a listing taken after each fsync of it; before any, as written by
    `recrawl`, which fsyncs it). Spies call through: the code under test runs on real files."""

    def __init__(self, where: Path, monkeypatch: pytest.MonkeyPatch, fsync: bool) -> None:
        self.where, self.fsync = where, fsync
        self.mdb = where / "state" / "data.mdb"
        self.synced_mdb = self.mdb.read_bytes()  # the crawl was closed cleanly: synced
        self.synced_spool = sorted(p.name for p in spool_dir(where).iterdir())
        self.image: tuple[bytes, list[str]] | None = None
        real_sync, real_fsync = FingerprintLog.sync, os.fsync

        def sync(log: FingerprintLog) -> None:
            real_sync(log)
            self.synced_mdb = self.mdb.read_bytes()

        def fsync(fd: int) -> None:
            real_fsync(fd)
            if os.readlink(f"/proc/self/fd/{fd}") == str(spool_dir(where)):
                self.synced_spool = sorted(p.name for p in spool_dir(where).iterdir())

        monkeypatch.setattr(FingerprintLog, "sync", sync)
        monkeypatch.setattr(os, "fsync", fsync)

    def now(self) -> None:
        """The power fails now: keep what is durable."""
        self.image = (self.mdb.read_bytes() if self.fsync else self.synced_mdb, list(self.synced_spool))

    def restore(self, spooled: dict[str, bytes] | None) -> None:
        """After the crawl closed: put the data dir back as the power loss left it (`spooled` None: the spool
        directory as it is, its deletes taken as durable)."""
        assert self.image is not None
        mdb, names = self.image
        self.mdb.write_bytes(mdb)
        (self.where / "state" / "lock.mdb").unlink()
        for name in names if spooled is not None else ():
            (spool_dir(self.where) / name).write_bytes(spooled[name])


def test_a_power_loss_after_a_spool_file_is_deleted_loses_no_recrawl(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """storage.fsync false: the commit applying a spool file is not synced by itself, while the file's delete
    reaches the disk within seconds (ext4's journal): the power fails right after the delete."""
    where = tmp_path / "crawl"
    with open_lmdb(where) as state:
        state.commit(Commit(links=[Link(A, 0)]), T0)
        finish(state, T0)
    (path,) = write_spool(where, [A])
    loss = PowerLoss(where, monkeypatch, fsync=False)
    real_unlink = Path.unlink

    def unlink(self: Path, missing_ok: bool = False) -> None:
        real_unlink(self, missing_ok)
        if self == path:
            loss.now()

    monkeypatch.setattr(Path, "unlink", unlink)
    with open_lmdb(where) as state:
        assert state.stats().queued == 1 and not path.exists()  # applied at open, the file deleted
    monkeypatch.undo()
    loss.restore(None)  # the delete reached the disk (the journal commits it within seconds)
    with open_lmdb(where) as state:
        assert finish(state, T0 + 1) == [A], "the recrawl request was lost"


def test_a_power_loss_after_a_spool_record_is_deleted_applies_nothing_twice(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """storage.fsync true: the commit deleting a spool file's record is durable at once; the file's delete
    only once its directory is fsynced. The URL is fetched again, then the power fails: applying the file twice
    would fetch it a third time."""
    where = tmp_path / "crawl"
    with open_lmdb(where) as state:
        state.commit(Commit(links=[Link(A, 0)]), T0)
        finish(state, T0)
    (path,) = write_spool(where, [A])
    spooled = {path.name: path.read_bytes()}
    loss = PowerLoss(where, monkeypatch, fsync=True)
    with LmdbCrawlState(where, NO_ROBOTS, dedup=DedupConfig(capacity=10_000), fsync=True, now=T0) as state:
        assert state._store.applied_names() == []  # the file applied, deleted and its record deleted
        assert finish(state, T0 + 1) == [A]  # the recrawl, fetched
    loss.now()
    monkeypatch.undo()
    loss.restore(spooled)
    with open_lmdb(where) as state:
        assert state.stats().queued == 0, "a spool file was applied twice"


def test_spool_lines_that_are_not_urls_are_skipped(tmp_path: Path) -> None:
    where = tmp_path / "crawl"
    open_lmdb(where).close()
    write_spool(where, ["not a url", "http://[::1", A])
    with open_lmdb(where) as state:
        assert finish(state, T0) == [A]


# -- seeds and a Bloom false positive (probabilistic mode) --------------------------------------------------


@pytest.mark.parametrize("deletable", [False, True])
def test_a_seed_the_filter_holds_by_mistake_is_still_queued(tmp_path: Path, deletable: bool) -> None:
    """The seed's bits are set in the real shared filter without it being in the log: exactly a false positive.
    An outlink in that position is dropped (probabilistic mode trusts the filter); the seed is not."""
    dedup = DedupConfig(capacity=10_000, exact=False, deletable=deletable)
    with LmdbCrawlState(tmp_path / "crawl", NO_ROBOTS, dedup=dedup, now=T0) as state:
        bloom = state.seen.bloom
        fill = bloom.count_many if deletable else bloom.add_many  # type: ignore[union-attr]
        fill([fingerprint(A), fingerprint(B)])
        assert state.commit(Commit(links=[Link(B, 1)]), T0).new == [False], "no false positive was made"
        assert state.commit(Commit(links=[Link(A, 0)]), T0).new == [True]
        assert finish(state, T0) == [A]


def test_frontier_add_seeds_survives_a_false_positive(tmp_path: Path) -> None:
    """Through the crawl's own entry point: Frontier.add_seeds, then a lease of the seed."""
    cfg = load_config({"seeds": [A], "scope": {"allowed_hosts": ["a.test"]},
                       "politeness": {"obey_robots": False, "delay": 0.0},
                       "dedup": {"capacity": 10_000, "exact": False},
                       "storage": {"data_dir": str(tmp_path / "data")}}, base_dir=tmp_path)
    with Frontier.from_config(cfg) as frontier:
        frontier.seen.bloom.add_many([fingerprint(A)])
        assert A in frontier.seen  # the filter says so; the log does not hold it
        assert frontier.add_seeds([A]) == 1
        assert A in [job.url for job in frontier.lease(10)]
