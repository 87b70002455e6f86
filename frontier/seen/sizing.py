"""Bloom filter sizing: m = -n ln p / (ln 2)^2 bits and k = round((m/n) ln 2) hashes; SharedBloom's layout
geometry (header, generations, partitions: see frontier.seen.bloom); whether this machine can hold the filter
(`check_fits_in_memory`), asked before anything is allocated; and the blocked filter of the blacklist
(`blocked_parameters`, `blacklist_parameters`: the exact blocked formula, searched for the fewest blocks).

Plain Python on purpose: the supervisor (run_frontier.py) checks memory before it spawns anything, and
importing frontier.seen.bloom (numpy, bitarray) for that would hold back the crawl's start by about 0.1 s.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass

from frontier.errors import ConfigError
from frontier.seen.shm import SHM_DIR

LN2_SQUARED = math.log(2) ** 2
GB = 10**9
GIB = 2**30
MEMINFO = "/proc/meminfo"

# SharedBloom's layout (frontier.seen.bloom re-exports these; its docstring explains them)
TIGHTENING = 0.1  # r: each generation's error rate is r times the previous one's
LATER_SHARE = 0.5  # generations >= 1 get this fraction of their geometric share (headroom below p)
GROWTH = 2  # each generation holds GROWTH times the items of the previous one
MAX_GENERATIONS = 24
MAX_PARTITIONS = 4096
PAGE = 4096
# Positions per partition of every filter (frontier.seen.positions explains them): below UNIFORM_LIMIT the
# multiply-shift reduction is uniform; PARTITION_LIMIT is where it stops working at all.
PARTITION_LIMIT = 1 << 32
UNIFORM_LIMIT = 1 << 28


@dataclass(frozen=True, slots=True)
class BloomParameters:
    """The size of a standard Bloom filter for `capacity` items at `error_rate`.

    Attributes:
        capacity: the items it is sized for.
        error_rate: the false-positive rate it keeps up to `capacity`.
        bits: m = -n ln p / (ln 2)^2, at least 64.
        hashes: k = round((m / n) ln 2), at least 1.
    """

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
    """Bits and hashes of an optimal Bloom filter for `capacity` items at false-positive rate `error_rate`.

    Args:
        capacity: the items (a whole number >= 1).
        error_rate: the false-positive rate, strictly between 0 and 1.
    """
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


def header_size(partitions: int) -> int:
    """Bytes of a SharedBloom header with `partitions` partitions (a multiple of PAGE)."""
    raw = 64 + MAX_GENERATIONS * partitions * 8 + partitions
    return -(-raw // PAGE) * PAGE


def generation_rate(error_rate: float, g: int) -> float:
    """Generation g's share of the filter's false-positive budget `error_rate`."""
    rate = error_rate * (1.0 - TIGHTENING) * TIGHTENING ** g
    return rate if g == 0 else rate * LATER_SHARE


def blocked_generation(blocked: bool, generation: int) -> bool:
    """Whether a generation of a SharedBloom created with `blocked` is blocked: generation 0 only. A blocked
    generation keeps each item's bits in one 512-bit block (one cache line, as the blacklist does), so a
    check-and-add touches one line of a filter far larger than the CPU caches, not k. Growth generations stay
    standard: as the rate falls a blocked filter needs ever more bits than a standard one (+16% at generation 0's
    9e-5, +30% at generation 1's 4.5e-6, +58% at generation 3's), and only a filter grown past its capacity has
    them."""
    return blocked and generation == 0


def generation_geometry(capacity: int, error_rate: float, partitions: int, *,
                        blocked: bool = False) -> tuple[int, int, int]:
    """(items per partition, bits per partition, hashes) of a generation for `capacity` items at `error_rate`.

    Items spread over partitions at random, so a partition's share of `capacity` items varies by
    about sqrt(capacity/P); sized for exactly capacity/P, half of them would overflow into the
    next (twice as large) generation at capacity. Each gets 4 standard deviations of headroom:
    about +2% bits at 3M items over 64 partitions, and a 3e-5 chance per partition to spill. A blocked
    generation (`blocked_generation`) has whole blocks a partition, as few as hold its share at the rate.
    """
    share = capacity / partitions
    if partitions > 1:
        share += 4.0 * math.sqrt(share) + 1.0
    part_capacity = math.ceil(share)
    if blocked:
        blocked = blocked_parameters(part_capacity, error_rate)
        return part_capacity, blocked.blocks * BLOCK_BITS, blocked.hashes
    params = bloom_parameters(part_capacity, error_rate)
    return part_capacity, max(64, -(-params.bits // 64) * 64), params.hashes


def generation_bytes(capacity: int, error_rate: float, partitions: int, *, blocked: bool = False) -> int:
    """Bytes of a generation's bits (see generation_geometry)."""
    return generation_geometry(capacity, error_rate, partitions, blocked=blocked)[1] * partitions // 8


def is_partition_count(partitions: object) -> bool:
    return (isinstance(partitions, int) and not isinstance(partitions, bool) and 1 <= partitions <= MAX_PARTITIONS
            and not partitions & (partitions - 1))


def check_partitions(partitions: int) -> None:
    """ConfigError unless `partitions` is a power of two in [1, MAX_PARTITIONS]."""
    if not is_partition_count(partitions):
        raise ConfigError(f"must be a power of two in [1, {MAX_PARTITIONS}], got {partitions!r}", "partitions")


def allocation_bytes(capacity: int, error_rate: float, partitions: int, *, blocked: bool = False) -> int:
    """Bytes `SharedBloom.create(capacity, error_rate, partitions=partitions, blocked=blocked)` allocates: header,
    generation 0."""
    return header_size(partitions) + generation_bytes(capacity, generation_rate(error_rate, 0), partitions,
                                                      blocked=blocked)


def min_partitions(positions: int, limit: int = PARTITION_LIMIT) -> int:
    """The smallest power of two P that splits `positions` into partitions of fewer than `limit` each."""
    partitions = 1
    while -(-positions // partitions) >= limit:
        partitions *= 2
    return partitions


def partition_limit(generation: int) -> int:
    """Bits a partition of this generation must stay under: 2^28 for generation 0 (where the multiply-shift
    is uniform: it holds 90% of the rate budget), 2^32 (where the reduction works at all) for growth."""
    return UNIFORM_LIMIT if generation == 0 else PARTITION_LIMIT


def partitions_needed(capacity: int, error_rate: float, generation: int = 0, *, blocked: bool = False) -> int:
    """The fewest partitions (a power of two, maybe over MAX_PARTITIONS) that keep each partition of the
    given generation of `SharedBloom.create(capacity, error_rate)` under `partition_limit(generation)` bits."""
    gen_capacity, rate = capacity * GROWTH ** generation, generation_rate(error_rate, generation)
    limit = partition_limit(generation)
    partitions = 1
    while generation_geometry(gen_capacity, rate, partitions, blocked=blocked_generation(blocked, generation))[1] \
            >= limit:  # fewer bits a partition as P grows
        partitions *= 2
    return partitions


def check_fits_in_memory(capacity: float, error_rate: float, partitions: int, *, blocked: bool = False) -> None:
    """Raise ConfigError (one line) unless `SharedBloom.create(capacity, error_rate, partitions=partitions)` can
    allocate its filter on this machine: valid arguments, its bytes within both the free space of /dev/shm and
    MemAvailable, and every partition of generation 0 under 2^28 bits (`partition_limit`). Ask before
    allocating: a shared-memory block larger than the free space of /dev/shm is not refused, its first write to a
    page that does not fit is a SIGBUS."""
    n = check_capacity_and_rate(capacity, error_rate)
    check_partitions(partitions)
    need = allocation_bytes(n, error_rate, partitions, blocked=blocked)
    shortfall = memory_shortfall(need)
    if shortfall is not None:
        raise ConfigError(f"a Bloom filter for {n:,} URLs at error rate {error_rate:g} needs {format_size(need)} "
                          f"of shared memory; {shortfall}", "capacity")
    least = partitions_needed(n, error_rate, blocked=blocked)
    if least > MAX_PARTITIONS:
        raise ConfigError(f"{n:,} URLs at error rate {error_rate:g} need {least} partitions of under 2^28 bits, more "
                          f"than the {MAX_PARTITIONS} a filter can have; lower the capacity (the filter grows past "
                          "it) or raise the error rate", "capacity")
    if partitions < least:
        raise ConfigError(f"{partitions} partitions would each hold over 2^28 bits for {n:,} URLs at error rate "
                          f"{error_rate:g}; use {least} or more", "partitions")


# -- blocked Bloom filters (the blacklist: frontier.seen.blacklist) -----------------------------------------------
#
# A blocked filter (Putze, Sanders, Singler, "Cache-, hash- and space-efficient Bloom filters", 2007) puts all k
# bits of an item in one block of BLOCK_BITS bits (one 64-byte cache line), chosen by the item's hash: one cache
# miss per item instead of k. The price is memory: blocks get n/B items on average but Poisson-many, and an
# overfull block's false positives outweigh what an underfull one saves. Its rate at capacity, with B blocks of
# s bits, block load j ~ Poisson(n/B), and positions drawn with replacement (a query with d distinct positions):
#
#     FP = sum_j Pois(j; n/B) sum_d P(d distinct of k draws from s) (1 - (1 - 1/s)^(k j))^d
#
# The blacklist is sized for BLACKLIST_HEADROOM * p (as SharedBloom's generation 0 is): sized at exactly p,
# a sample of its rate at capacity reads above the target about half the time.

BLOCK_BITS = 512
BLACKLIST_HEADROOM = 0.9
MAX_BLOCKS = 1 << 32  # the block index is a 64x32-bit multiply-high (frontier.seen.blocked)
MAX_BLOCK_HASHES = 64
_POISSON_SPAN = 10.0  # standard deviations of block load summed on each side of the mean (the rest is < 1e-20)


@dataclass(frozen=True, slots=True)
class BlockedParameters:
    """The size of a blocked Bloom filter for `capacity` items at `error_rate` (the smallest block count, with
    the hash count that needs the fewest blocks)."""

    capacity: int
    error_rate: float
    blocks: int
    hashes: int

    @property
    def bits(self) -> int:
        return self.blocks * BLOCK_BITS

    @property
    def bytes(self) -> int:
        return self.bits // 8

    @property
    def bits_per_item(self) -> float:
        return self.bits / self.capacity

    @property
    def expected_error_rate(self) -> float:
        """False-positive rate when filled to capacity (the blocked formula above)."""
        return blocked_error_rate(self.capacity / self.blocks, self.hashes)


def _distinct_odds(hashes: int) -> list[float]:
    """P(d distinct positions among `hashes` uniform draws from BLOCK_BITS), d = 0..hashes."""
    odds = [1.0] + [0.0] * hashes
    for _ in range(hashes):
        odds = [odds[d] * d / BLOCK_BITS + (odds[d - 1] * (BLOCK_BITS - d + 1) / BLOCK_BITS if d else 0.0)
                for d in range(hashes + 1)]
    return odds


def generation_error_rate(items: int, bits: int, hashes: int, fill: float, *, blocked: bool) -> float:
    """A generation's estimated false-positive rate now: fill^k for a standard one; for a blocked one, from its
    items per block (their spread makes it higher than its fill^k)."""
    if not blocked:
        return fill ** hashes
    return blocked_error_rate(items / (bits // BLOCK_BITS), hashes) if items else 0.0


def blocked_error_rate(load: float, hashes: int) -> float:
    """False-positive rate of a blocked filter with `load` items per block on average and `hashes` bits each."""
    odds = [(d, q) for d, q in enumerate(_distinct_odds(hashes)) if q > 1e-15]
    keep = math.log1p(-1.0 / BLOCK_BITS) * hashes  # ln of the chance one item leaves a given bit unset
    spread = _POISSON_SPAN * math.sqrt(load) + 10.0
    total = 0.0
    for j in range(max(1, math.floor(load - spread)), math.ceil(load + spread) + 1):
        weight = math.exp(j * math.log(load) - load - math.lgamma(j + 1))
        fill = -math.expm1(keep * j)
        total += weight * math.fsum(q * fill ** d for d, q in odds)
    return total


def _max_load(n: int, hashes: int, error_rate: float) -> float:
    """The largest mean block load, up to n (one block), whose rate is at most `error_rate`: regula falsi
    (Illinois) on the log of the rate, which rises smoothly with the load."""
    def excess(load: float) -> float:
        rate = blocked_error_rate(load, hashes)
        return math.log(rate / error_rate) if rate > 0.0 else -math.inf

    low = float(min(n, BLOCK_BITS))  # the rate at a load of s is over 1/2 for any k: rarely a step up
    f_low = excess(low)
    while f_low <= 0.0:
        if low == n:
            return low
        low = min(float(n), 2 * low)
        f_low = excess(low)
    while f_low > 0.0:  # the rate falls to 0 with the load: halve until it is under the target
        high, f_high = low, f_low
        low /= 2
        f_low = excess(low)
    if f_low == -math.inf:  # too small to have a logarithm: bisect down to a measurable one
        return low
    side = 0
    for _ in range(200):
        if high - low <= low * 1e-13:
            break
        mid = (low * f_high - high * f_low) / (f_high - f_low)
        if not low < mid < high:
            mid = (low + high) / 2
        f_mid = excess(mid)
        if f_mid <= 0.0:
            low, f_low = mid, f_mid
            if side == -1:
                f_high /= 2
            side = -1
        else:
            high, f_high = mid, f_mid
            if side == 1:
                f_low /= 2
            side = 1
    return low


def _min_blocks(n: int, hashes: int, error_rate: float) -> int:
    """The fewest blocks that hold `n` items at `error_rate` with `hashes` bits each."""
    blocks = max(1, math.ceil(n / _max_load(n, hashes, error_rate)))
    while blocks > 1 and blocked_error_rate(n / (blocks - 1), hashes) <= error_rate:  # float rounding at the edge
        blocks -= 1
    while blocked_error_rate(n / blocks, hashes) > error_rate:
        blocks += 1
    return blocks


def blocked_parameters(capacity: float, error_rate: float) -> BlockedParameters:
    """Blocks and hashes of the smallest blocked Bloom filter for `capacity` items at `error_rate`: for each k
    around the standard filter's, the fewest blocks (the rate falls as blocks are added); the best k wins."""
    n = check_capacity_and_rate(capacity, error_rate)
    return _blocked_parameters(n, float(error_rate))


@functools.lru_cache(maxsize=64)
def _blocked_parameters(n: int, error_rate: float) -> BlockedParameters:
    start = min(MAX_BLOCK_HASHES, bloom_parameters(n, error_rate).hashes)
    best = {start: _min_blocks(n, start, error_rate)}
    for step in (-1, 1):  # the block count is unimodal in k: walk each way while it falls
        k = start + step
        while 1 <= k <= MAX_BLOCK_HASHES:
            best[k] = _min_blocks(n, k, error_rate)
            if best[k] > best[k - step]:
                break
            k += step
    hashes = min(best, key=lambda k: (best[k], k))
    if best[hashes] >= MAX_BLOCKS:
        raise ConfigError(f"{n:,} items at error rate {error_rate:g} need {best[hashes]:,} blocks of {BLOCK_BITS} "
                          f"bits, more than the {MAX_BLOCKS:,} a blocked filter can index", "capacity")
    return BlockedParameters(capacity=n, error_rate=error_rate, blocks=best[hashes], hashes=hashes)


def blacklist_parameters(capacity: float, error_rate: float) -> BlockedParameters:
    """The filter `Blacklist.build(path, capacity, error_rate)` makes: blocked, sized for BLACKLIST_HEADROOM *
    error_rate; its `error_rate` is the target, `expected_error_rate` the rate at capacity."""
    n = check_capacity_and_rate(capacity, error_rate)
    sized = _blocked_parameters(n, float(error_rate) * BLACKLIST_HEADROOM)
    return BlockedParameters(capacity=n, error_rate=float(error_rate), blocks=sized.blocks, hashes=sized.hashes)
