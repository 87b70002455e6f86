"""Shared-memory segments: every mapping of a filter's block asks the kernel for huge pages."""

from __future__ import annotations

import os
import uuid

from frontier.seen.shm import Segment


def _vm_flags(buf: memoryview) -> set[str]:
    """The VmFlags of this process's mapping that holds `buf`'s first byte (/proc/self/smaps)."""
    import ctypes

    address = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(maxsplit=1)[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= address < hi
            elif inside and head == "VmFlags:":
                return set(line.split()[1:])
    raise AssertionError(f"no mapping holds {address:#x}")


def test_created_and_attached_blocks_are_advised_huge_pages() -> None:
    """`hg` is VM_HUGEPAGE: set by madvise(MADV_HUGEPAGE) whatever /dev/shm's mount honours."""
    name = f"frontier-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    owner = Segment.create(name, 4 << 20)
    try:
        other = Segment.attach(name)
        try:
            assert "hg" in _vm_flags(owner.buf)
            assert "hg" in _vm_flags(other.buf)
        finally:
            other.close()
    finally:
        owner.unlink()
        owner.close()
