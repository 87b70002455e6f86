"""Bloom filter sizing: m = -n ln p / (ln 2)^2 bits and k = round((m/n) ln 2) hashes; and whether this
machine can hold the filter (`check_fits_in_memory`), asked before anything is allocated."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from frontier.errors import ConfigError
from frontier.shm import SHM_DIR

LN2_SQUARED = math.log(2) ** 2
GB = 10**9
GIB = 2**30
MEMINFO = "/proc/meminfo"


@dataclass(frozen=True, slots=True)
class BloomParameters:
    """The size of a standard Bloom filter for `capacity` items at `error_rate`."""

    capacity: int
    error_rate: float
    bits: int
    hashes: int

    @property
    def bytes(self) -> int:
        return (self.bits + 7) // 8

    @property
    def bits_per_item(self) -> float:
        return self.bits / self.capacity

    @property
    def expected_error_rate(self) -> float:
        """False-positive rate when filled to capacity, with k rounded: (1 - e^(-kn/m))^k."""
        return (1.0 - math.exp(-self.hashes * self.capacity / self.bits)) ** self.hashes


def check_capacity_and_rate(capacity: float, error_rate: float) -> int:
    """Validate the two sizing inputs up front; return the capacity as an int."""
    if (isinstance(capacity, bool) or not isinstance(capacity, (int, float))
            or (isinstance(capacity, float) and not math.isfinite(capacity)) or capacity != int(capacity)):
        raise ConfigError(f"must be a whole number, got {capacity!r}", "capacity")
    if capacity < 1:
        raise ConfigError(f"must be at least 1, got {capacity!r}", "capacity")
    if isinstance(error_rate, bool) or not isinstance(error_rate, (int, float)) or not 0.0 < error_rate < 1.0:
        raise ConfigError(f"must be a number strictly between 0 and 1, got {error_rate!r}", "error_rate")
    return int(capacity)


def bloom_parameters(capacity: float, error_rate: float) -> BloomParameters:
    """Bits and hashes of an optimal Bloom filter for `capacity` items at false-positive rate `error_rate`."""
    n = check_capacity_and_rate(capacity, error_rate)
    bits = max(64, math.ceil(-n * math.log(error_rate) / LN2_SQUARED))
    hashes = max(1, round(bits / n * math.log(2)))
    return BloomParameters(capacity=n, error_rate=float(error_rate), bits=bits, hashes=hashes)


def format_size(nbytes: int) -> str:
    """Bytes in decimal and binary units: "23.96 GB (22.32 GiB)"; MB/MiB below a gigabyte."""
    if nbytes >= GB:
        return f"{nbytes / GB:,.2f} GB ({nbytes / GIB:,.2f} GiB)"
    return f"{nbytes / 10**6:,.2f} MB ({nbytes / 2**20:,.2f} MiB)"


def available_memory() -> tuple[int, int]:
    """(bytes free in /dev/shm, MemAvailable from /proc/meminfo): a shared-memory filter needs room in both."""
    st = os.statvfs(SHM_DIR)
    with open(MEMINFO) as f:
        fields = dict(line.split(":", 1) for line in f)
    return st.f_bavail * st.f_frsize, int(fields["MemAvailable"].split()[0]) * 1024  # the kernel says kB: KiB


def memory_shortfall(nbytes: int) -> str | None:
    """None if `nbytes` of shared memory fit in both /dev/shm and MemAvailable; else what there is, as a phrase."""
    shm_free, mem_available = available_memory()
    if nbytes <= min(shm_free, mem_available):
        return None
    return f"{SHM_DIR} has {format_size(shm_free)} free and MemAvailable is {format_size(mem_available)}"


def check_fits_in_memory(capacity: float, error_rate: float, partitions: int) -> None:
    """Raise ConfigError (one line) unless `SharedBloom.create(capacity, error_rate, partitions=partitions)` can
    allocate its filter on this machine: valid arguments, its bytes within both the free space of /dev/shm and
    MemAvailable, and every partition of generation 0 under 2^28 bits (`frontier.bloom.partition_limit`). Ask before allocating: a shared-memory block larger than
    the free space of /dev/shm is not refused, its first write to a page that does not fit is a SIGBUS."""
    from frontier.bloom import MAX_PARTITIONS, allocation_bytes, check_partitions, partitions_needed  # bloom imports us

    n = check_capacity_and_rate(capacity, error_rate)
    check_partitions(partitions)
    need = allocation_bytes(n, error_rate, partitions)
    shortfall = memory_shortfall(need)
    if shortfall is not None:
        raise ConfigError(f"a Bloom filter for {n:,} URLs at error rate {error_rate:g} needs {format_size(need)} "
                          f"of shared memory; {shortfall}", "capacity")
    least = partitions_needed(n, error_rate)
    if least > MAX_PARTITIONS:
        raise ConfigError(f"{n:,} URLs at error rate {error_rate:g} need {least} partitions of under 2^28 bits, more "
                          f"than the {MAX_PARTITIONS} a filter can have; lower the capacity (the filter grows past "
                          "it) or raise the error rate", "capacity")
    if partitions < least:
        raise ConfigError(f"{partitions} partitions would each hold over 2^28 bits for {n:,} URLs at error rate "
                          f"{error_rate:g}; use {least} or more", "partitions")
