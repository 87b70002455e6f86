"""A response body, read and decoded with a cap, and sniffed: what the fetcher (workers.fetcher) reads.

Bodies are read with automatic decompression off and decoded here, chunk by chunk, with an output cap:
a gzip or brotli bomb stops at the cap + 1 decoded bytes. An unknown Content-Encoding token is passed
through as identity (what browsers do with, e.g., the common misconfiguration "Content-Encoding: utf-8").
A body that does not decode raises BadEncoding, which the fetcher turns into FAIL "bad_encoding".
Sniffing looks at the first bytes only: HTML markers when there is no Content-Type (`looks_html`), and
control bytes in what claims to be HTML (`looks_binary`).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

try:  # optional: br is only advertised when it can be decoded
    import brotli
except ImportError:  # pragma: no cover - depends on the environment
    brotli = None

if TYPE_CHECKING:
    import aiohttp

SNIFF_BYTES = 512
BINARY_SNIFF_BYTES = 1024
ACCEPT_ENCODING = "gzip, deflate, br" if brotli is not None else "gzip, deflate"
_HTML_MARKERS = (b"<html", b"<!doctype html", b"<a ", b"<head", b"<body")
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
# WHATWG MIME sniffing's "binary data bytes": random bytes are about 10% of them, text next to none
_CONTROL_BYTES = bytes([*range(0x00, 0x09), 0x0B, *range(0x0E, 0x1B), *range(0x1C, 0x20)])
BINARY_CONTROL_SHARE = 1 / 32


def mime_type(content_type: str | None) -> str | None:
    """The media type of a Content-Type value, lowercased and without parameters; None if there is none."""
    if not content_type:
        return None
    mime = content_type.split(";", 1)[0].strip().lower()
    return mime or None


def looks_html(head: bytes) -> bool:
    """An HTML marker in the first SNIFF_BYTES (of a body served without a Content-Type)."""
    sample = head[:SNIFF_BYTES].lstrip(b"\xef\xbb\xbf \t\r\n\x0c").lower()
    return any(marker in sample for marker in _HTML_MARKERS)


def looks_binary(head: bytes, content_type: str | None) -> bool:
    """NUL bytes, and more than BINARY_CONTROL_SHARE control bytes, in the first 1 KB, unless the page is
    UTF-16/32 (which is full of NULs). A few stray NULs in a real (if broken) page do not make it binary."""
    sample = head[:BINARY_SNIFF_BYTES]
    if b"\x00" not in sample:
        return False
    if head.startswith(_UTF16_BOMS):
        return False
    if content_type and ("utf-16" in content_type.lower() or "utf-32" in content_type.lower()):
        return False
    return len(sample) - len(sample.translate(None, _CONTROL_BYTES)) > len(sample) * BINARY_CONTROL_SHARE


# -- content decoding with an output cap -----------------------------------------------------------


class BadEncoding(Exception):
    """The body does not decode per its Content-Encoding."""


class _Identity:
    def feed(self, data: bytes, limit: int) -> bytes:
        return data


class _Zlib:
    """gzip (several members allowed) or deflate (zlib-wrapped or raw, told apart by the first bytes)."""

    def __init__(self, kind: str) -> None:
        self._kind = kind
        self._d: Any = None

    def _new(self, first: bytes) -> Any:
        if self._kind == "gzip":
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        zlib_header = len(first) >= 2 and first[0] & 0x0F == 8 and (first[0] << 8 | first[1]) % 31 == 0
        return zlib.decompressobj(zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS)

    def feed(self, data: bytes, limit: int) -> bytes:
        out = b""
        try:
            while data:
                if self._d is None:
                    self._d = self._new(data)
                out += self._d.decompress(data, max(1, limit - len(out)))
                if len(out) >= limit:
                    return out
                if not self._d.eof:
                    return out
                data = self._d.unused_data  # a next gzip member (or trailing garbage)
                self._d = None
                if self._kind != "gzip":
                    return out  # bytes after a deflate stream are ignored
                if data and not data.startswith(b"\x1f\x8b"):
                    return out  # trailing garbage after the last gzip member: ignored, as browsers do
        except zlib.error as exc:
            raise BadEncoding(str(exc)) from None
        return out


class _Brotli:
    def __init__(self) -> None:
        self._d = brotli.Decompressor()

    def feed(self, data: bytes, limit: int) -> bytes:
        try:
            return self._d.process(data, output_buffer_limit=max(1, limit))
        except brotli.error as exc:
            raise BadEncoding(str(exc)) from None


def decoder_for(content_encoding: str | None) -> Any:
    """A decoder of the Content-Encoding (`feed(data, limit) -> bytes`, at most `limit` bytes out); BadEncoding
    for stacked codings, or br without brotli installed."""
    codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if not codings:
        return _Identity()
    if len(codings) > 1:
        raise BadEncoding(f"stacked content codings {content_encoding!r}")
    coding = codings[0]
    if coding in ("gzip", "x-gzip"):
        return _Zlib("gzip")
    if coding == "deflate":
        return _Zlib("deflate")
    if coding == "br":
        if brotli is None:
            raise BadEncoding("br without brotli installed")
        return _Brotli()
    return _Identity()  # unknown token: browsers pass the body through


class Body:
    """What `read_body` read."""

    __slots__ = ("data", "raw", "size", "stop")

    def __init__(self, data: bytes, raw: bytes | None, size: int, stop: str | None) -> None:
        self.data = data  # decoded, at most the cap
        self.raw = raw  # as received (for the WARC), when asked for and complete
        self.size = size  # decoded bytes read
        self.stop = stop  # None: read to the end; else the reason reading stopped early


async def read_body(resp: aiohttp.ClientResponse, cap: int, *, truncate: bool = False, keep_raw: bool = False,
                    inspect: Callable[[bytes], str | None] | None = None) -> Body:
    """Read and decode the body up to `cap` decoded bytes.

    Past the cap: stop with "too_large", or when `truncate`, keep the first `cap` bytes as a complete body.
    `inspect` sees the first BINARY_SNIFF_BYTES decoded bytes (or all of a shorter body) once; a reason it
    returns stops the read.
    """
    decoder = decoder_for(resp.headers.get("Content-Encoding"))
    parts: list[bytes] = []
    raw: list[bytes] | None = [] if keep_raw else None
    size = 0
    inspected = inspect is None
    async for chunk in resp.content.iter_any():
        if raw is not None:
            raw.append(chunk)
        out = decoder.feed(chunk, cap + 1 - size)
        if not out:
            continue
        parts.append(out)
        size += len(out)
        if size > cap:  # checked first: a bomb of NUL bytes is "too_large", whatever its first chunk holds
            if truncate:
                return Body(b"".join(parts)[:cap], None, size, None)
            return Body(b"", None, size, "too_large")
        if not inspected and size >= BINARY_SNIFF_BYTES:
            inspected = True
            stop = inspect(b"".join(parts)[:BINARY_SNIFF_BYTES])  # type: ignore[misc]
            if stop:
                return Body(b"", None, size, stop)
    data = b"".join(parts)
    if not inspected:
        stop = inspect(data)  # type: ignore[misc]
        if stop:
            return Body(b"", None, size, stop)
    return Body(data, b"".join(raw) if raw is not None else None, size, None)
