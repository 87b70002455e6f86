"""The 16-byte identity of a canonical URL, from which everything else derives.

Partition (top bits), Bloom positions (two 64-bit halves, Kirsch-Mitzenmacher) and the LMDB key
all come from these bytes, so the Bloom filter can be rebuilt from the log without URL strings.
xxh3_128 is stable across processes and restarts, unlike Python's salted `hash()`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import xxhash

from frontier.native import native

FINGERPRINT_SIZE = 16

_digest = xxhash.xxh3_128_digest


def fingerprint(canonical_url: str) -> bytes:
    """xxh3_128 of the UTF-8 canonical URL, big-endian: 16 bytes.

    Args:
        canonical_url: a URL as `canonicalize` returns it (two spellings of one URL hash apart otherwise).
    """
    return _digest(canonical_url.encode("utf-8", "surrogatepass"))


def fingerprints(canonical_urls: Iterable[str], seed: int = 0) -> list[bytes]:
    """`fingerprint` for a batch, without a Python call per URL beyond the hash itself (none at all when
    frontier._native is built: one C loop, the same digests, 2.3x faster). `seed` (a secret) keys the hash:
    xxh3_128 seeded, computed in Python, so crafted URLs cannot choose their fingerprints' bits."""
    check_batch(canonical_urls)
    if seed:
        return [_digest(url.encode("utf-8", "surrogatepass"), seed) for url in canonical_urls]
    compiled = native()
    if compiled is not None:
        return compiled.fingerprints(canonical_urls)
    digest = _digest
    return [digest(url.encode("utf-8", "surrogatepass")) for url in canonical_urls]


def item_fingerprint(item: str | bytes) -> bytes:
    """The fingerprint of a filter item (SharedBloom, CountingBloom): a 16-byte fingerprint as it is, a URL
    string canonicalised and hashed; TypeError for anything else."""
    if isinstance(item, bytes) and len(item) == FINGERPRINT_SIZE:
        return item
    if isinstance(item, str):
        from frontier.url.canonical import canonicalize

        return fingerprint(canonicalize(item))
    raise TypeError(f"expected a URL string or a {FINGERPRINT_SIZE}-byte fingerprint, got {type(item).__name__}")


def item_fingerprints(items: Sequence[str | bytes]) -> list[bytes]:
    """`item_fingerprint` for a batch; a batch that is all 16-byte fingerprints passes through at C speed."""
    check_batch(items)
    if items and set(map(type, items)) == {bytes} and set(map(len, items)) == {FINGERPRINT_SIZE}:
        return items if isinstance(items, list) else list(items)
    return [item_fingerprint(x) for x in items]


def check_batch(items: object) -> None:
    """TypeError for a bare str or bytes where a batch is expected: iterated, it is a batch of characters."""
    if isinstance(items, (str, bytes, bytearray, memoryview)):
        raise TypeError(f"expected a batch (a list of URLs or fingerprints), got a bare {type(items).__name__}; "
                        "pass [item] for one")
