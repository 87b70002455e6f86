"""Bloom filter sizing: m = -n ln p / (ln 2)^2 bits and k = round((m/n) ln 2) hashes."""

from __future__ import annotations

import math
from dataclasses import dataclass

from frontier.errors import ConfigError

LN2_SQUARED = math.log(2) ** 2


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
