"""POSIX shared-memory segments with one owner, and cross-process byte-range locks on them.

Python 3.11's `SharedMemory(create=False)` registers the attaching process with the resource
tracker, which may unlink the block when that process exits. So only a creator goes through
`SharedMemory` (and is tracked: a crashed library owner's segments are still reclaimed); attaching
maps /dev/shm/<name> directly and is never tracked. Linux only, like the rest of frontier.

Every mapping asks for transparent huge pages (`madvise(MADV_HUGEPAGE)`): a filter bigger than the caches
costs a TLB miss per probe with 4 KiB pages, and a page walk is dear in a VM. The kernel honours the advice
where /dev/shm is mounted `huge=advise` (or `huge=always`); the default mount (`huge=never`) ignores it.

Locks are `fcntl` record locks on the segment file: the kernel drops them when a holder dies, so a
process killed with SIGKILL inside a critical section never blocks the others.

A segment's owner keeps it mapped until it unlinks it; so does every process attached to it. A frontier_*
segment that no live process maps is one whose owner died without unlinking it (a crawl killed and never
resumed, its data dir deleted; a Scrapy DupeFilter dropped without close() in a process killed since):
`reclaim_orphans` (run at the start of every crawl and by `frontier fresh`) removes those, and
multiprocessing's named semaphores (its queues' and events' locks, /dev/shm/sem.mp-*) in the same state,
which a kill -9 of a crawl's process group leaves (it kills the resource tracker that would unlink them). A
segment's name ties it to its data dir (`default_bloom_name`: a hash of the path), so a resumed crawl finds and
replaces its own at once; the live mappings say whether its owner is alive.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import threading
import time
import weakref
from multiprocessing import resource_tracker, shared_memory
from pathlib import Path

import xxhash

from frontier.errors import StorageError

SHM_DIR = "/dev/shm"

_thread_locks: dict[str, threading.RLock] = {}
_thread_locks_guard = threading.Lock()


class Segment:
    """One mapped shared-memory block. `close()` per handle; `unlink()` once, by the owner.

    The mapping is a plain `mmap` (a creator's `SharedMemory` is closed at once): an mmap is freed only after
    its last view, so a handle dropped without `close()` while a bitarray still views the block cannot end in
    `BufferError` (SharedMemory's `__del__` closes its mmap under the view). An owner's handle dropped without
    `unlink()` unlinks the block when it is garbage collected, so a forgotten filter leaves nothing in /dev/shm."""

    def __init__(self, name: str, buf: memoryview, size: int, mapping: mmap.mmap, fd: int, *,
                 owned_as: str | None = None) -> None:
        self.name = name
        self.buf = buf
        self.size = size
        self._mapping = mapping
        self._fd = fd  # our own descriptor of the segment file, used for record locks
        self._closed = False
        self._close_fd = weakref.finalize(self, os.close, fd)
        self._unlink = None if owned_as is None else weakref.finalize(self, _unlink_owned, name, owned_as)

    @classmethod
    def create(cls, name: str, size: int, *, tracked: bool = True) -> "Segment":
        """Create a zero-filled block; `tracked=False` when the creator is not its owner."""
        shm = shared_memory.SharedMemory(name=name, create=True, size=size)
        tracked_name = shm._name  # type: ignore[attr-defined]
        shm.close()
        if not tracked:
            resource_tracker.unregister(tracked_name, "shared_memory")
        try:
            segment = cls.attach(name)
        except BaseException:
            _unlink_owned(name, tracked_name if tracked else None)
            raise
        if tracked:
            segment._unlink = weakref.finalize(segment, _unlink_owned, name, tracked_name)
        return segment

    @classmethod
    def attach(cls, name: str) -> "Segment":
        """Map an existing block without registering it with the resource tracker."""
        fd = os.open(os.path.join(SHM_DIR, name), os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            mm = mmap.mmap(fd, size)
            advise_huge_pages(mm)
        except BaseException:
            os.close(fd)
            raise
        return cls(name, memoryview(mm), size, mm, fd)

    @classmethod
    def attach_filter(cls, name: str, what: str) -> "Segment":
        """`attach` for a filter's block, its failures one StorageError that names `what` ("frontier Bloom
        filter", ...): missing, empty (not, or not yet, a filter) or not openable."""
        try:
            return cls.attach(name)
        except FileNotFoundError:
            raise StorageError(f"no {what} named {name!r}") from None
        except ValueError:  # mmap of an empty file
            raise StorageError(f"shared memory block {name!r} is empty, not a {what}") from None
        except OSError as e:
            raise StorageError(f"cannot open shared memory block {name!r}: {e.strerror or e}") from None

    def lock(self, start: int, length: int) -> "RangeLock":
        """A cross-process exclusive lock on bytes [start, start+length) of this block's lock space."""
        return RangeLock(self, start, length)

    def close(self) -> None:
        """Unmap this handle. Idempotent. Views of `buf` must be released first."""
        if self._closed:
            return
        self.buf.release()
        self._mapping.close()  # BufferError while a view is exported: the mapping stays, close again later
        self._closed = True
        self._close_fd()

    def unlink(self) -> None:
        """Remove the block's name; mappings stay valid until closed. Idempotent."""
        if self._unlink is not None:
            self._unlink()
        else:
            unlink_name(self.name)


def _unlink_owned(name: str, tracked_name: str | None) -> None:
    """Unlink an owner's block, and take it off the resource tracker's list (the tracker would warn of it)."""
    unlink_name(name)
    if tracked_name is not None:
        resource_tracker.unregister(tracked_name, "shared_memory")


def advise_huge_pages(mm: mmap.mmap) -> None:
    """Ask for huge pages on a mapping; a kernel without transparent huge pages says EINVAL: 4 KiB pages then."""
    try:
        mm.madvise(mmap.MADV_HUGEPAGE)
    except OSError:
        pass


def unlink_name(name: str) -> bool:
    """Remove a block by name (stale segments after a crash); True if it existed."""
    try:
        os.unlink(os.path.join(SHM_DIR, name))
    except FileNotFoundError:
        return False
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:  # no block can have this name
            return False
        raise
    return True


def mapped_inodes() -> set[int]:
    """Inodes of the /dev/shm files that some live process maps (from /proc/*/maps; a process that ends
    meanwhile is skipped). By inode: glibc's sem_open maps a semaphore under a temporary name before it links
    the final one, so its creator's mapping names a deleted file."""
    inodes: set[int] = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/maps", "rb") as maps:
                for line in maps:
                    if b" /dev/shm/" in line:
                        inodes.add(int(line.split()[4]))
        except OSError:
            continue
    return inodes


ORPHANS = ("frontier_", "sem.mp-")  # frontier's segments, multiprocessing's named semaphores
SEGMENT_GRACE = 2.0  # seconds: a segment this young may be between its creation and its creator's mmap


def reclaim_orphans() -> list[str]:
    """Unlink the frontier segments and multiprocessing semaphores of this user in /dev/shm that no live
    process maps (see the module doc): what dead owners left. Only names that existed before the mappings were
    read are judged (one linked later may not be mapped yet by then), each by the inode it had; a segment
    younger than SEGMENT_GRACE is left (glibc maps a semaphore before linking its name, SharedMemory maps a
    segment just after creating it). The names removed."""
    uid, now, found = os.geteuid(), time.time(), {}
    try:
        names = [n for n in os.listdir(SHM_DIR) if n.startswith(ORPHANS)]
    except OSError:
        return []
    for name in names:
        try:
            st = os.stat(os.path.join(SHM_DIR, name))
        except OSError:
            continue
        if st.st_uid == uid and (name.startswith("sem.") or now - st.st_ctime >= SEGMENT_GRACE):
            found[name] = st.st_ino
    if not found:
        return []
    mapped, removed = mapped_inodes(), []
    for name, inode in found.items():
        if inode in mapped:
            continue
        path = os.path.join(SHM_DIR, name)
        try:
            if os.stat(path).st_ino == inode:
                os.unlink(path)
                removed.append(name)
        except OSError:  # gone meanwhile
            continue
    return removed


def default_bloom_name(path: Path) -> str:
    """A stable shared-memory name per data dir, so a segment left by a killed run is found and replaced."""
    return "frontier_" + xxhash.xxh3_64_hexdigest(str(path.resolve()).encode())


def segment_exists(name: str) -> bool:
    return os.path.exists(os.path.join(SHM_DIR, name))


def generation_name(name: str, g: int) -> str:
    """The block of generation g of a growing filter (SharedBloom): `name` itself for 0, `<name>_g<g>` after."""
    return name if g == 0 else f"{name}_g{g}"


def unlink_all(name: str) -> int:
    """Unlink a filter's blocks by name, every generation's (also after its owner was killed); returns how many
    existed. Plain Python: the supervisor cleans up after a killed frontier process without importing numpy."""
    removed = int(unlink_name(name))
    g = 1
    while True:  # up to two missing generations in a row
        if unlink_name(generation_name(name, g)):
            removed += 1
        elif not segment_exists(generation_name(name, g + 1)):
            return removed
        g += 1


class RangeLock:
    """Exclusive across processes (fcntl) and across threads of this process (an RLock: a holder may take a second range).

    fcntl record locks belong to a process, not a thread, so a per-name thread lock is taken first.
    """

    __slots__ = ("_fd", "_start", "_length", "_thread_lock")

    def __init__(self, segment: Segment, start: int, length: int) -> None:
        self._fd = segment._fd
        self._start = start
        self._length = length
        with _thread_locks_guard:
            self._thread_lock = _thread_locks.setdefault(segment.name, threading.RLock())

    def __enter__(self) -> None:
        self._thread_lock.acquire()
        try:
            fcntl.lockf(self._fd, fcntl.LOCK_EX, self._length, self._start, os.SEEK_SET)
        except BaseException:
            self._thread_lock.release()
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            fcntl.lockf(self._fd, fcntl.LOCK_UN, self._length, self._start, os.SEEK_SET)
        finally:
            self._thread_lock.release()
