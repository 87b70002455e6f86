"""One gzip WARC file per worker process, written with warcio.

    WarcWriter(path, *, software="frontier") ; .write_exchange(...) ; .close()
    worker_warc_path(base, worker_id) -> Path      "crawl.warc.gz" -> "crawl-w3.warc.gz"

Each fetched page becomes a `response` record (status line, headers as received minus Transfer-Encoding,
the body exactly as it came off the wire, so a gzip body stays gzipped and Content-Encoding stays true) and
a `request` record (the headers actually sent), linked by WARC-Concurrent-To. Every record is its own gzip
member and the file is flushed after each pair, so a killed worker loses at most the pair being written
and the file stays readable. The file is opened for appending: a resumed crawl adds to it (a new
warcinfo record marks the restart).

Why one file per worker rather than the one name configured in output.warc: the workers are separate
processes, and one shared file would need a lock around every record pair (and a worker killed
while holding it, or in the middle of a pair, would damage the file for all). WARC readers and
replay tools take a set of files; run_frontier prints the names at the end of a crawl.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

__all__ = ["WarcWriter", "worker_warc_path"]

_SUFFIXES = (".warc.gz", ".warc", ".gz")
_HOP_BY_HOP = frozenset({"transfer-encoding"})  # the body is stored de-chunked


def worker_warc_path(base: Path, worker_id: int) -> Path:
    """`<dir>/<stem>-w<worker_id>.warc.gz` for the configured `output.warc` path."""
    name = base.name
    for suffix in _SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
            break
    return base.with_name(f"{name}-w{worker_id}.warc.gz")


class WarcWriter:
    """Appends request/response record pairs to one gzip WARC file; `close()` is idempotent."""

    def __init__(self, path: Path, *, software: str = "frontier") -> None:
        self._file: io.BufferedWriter | None = None
        self.path = Path(path)
        self.records = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "ab")  # noqa: SIM115 - owned by this object, closed in close()
        self._writer = WARCWriter(self._file, gzip=True)
        info = self._writer.create_warcinfo_record(
            self.path.name, {"software": software, "format": "WARC File Format 1.1"}
        )
        self._writer.write_record(info)
        self._file.flush()

    def write_exchange(
        self,
        *,
        url: str,
        method: str,
        request_headers: Iterable[tuple[str, str]],
        http_version: str,
        status: int,
        status_reason: str,
        response_headers: Iterable[tuple[str, str]],
        body: bytes,
        ip: str | None = None,
    ) -> None:
        """Write one response record and its request record, then flush."""
        if self._file is None:
            raise ValueError("WarcWriter is closed")
        writer = self._writer
        target = url.split("://", 1)[-1]
        path = target[target.find("/"):] if "/" in target else "/"
        req_headers = StatusAndHeaders(f"{method} {path} {http_version}", list(request_headers),
                                       is_http_request=True)
        resp_headers = StatusAndHeaders(
            f"{status} {status_reason}".rstrip(),
            [(k, v) for k, v in response_headers if k.lower() not in _HOP_BY_HOP],
            protocol=http_version,
        )
        extra = {"WARC-IP-Address": ip} if ip else None
        response = writer.create_warc_record(url, "response", payload=io.BytesIO(body),
                                             length=len(body), http_headers=resp_headers,
                                             warc_headers_dict=extra)
        request = writer.create_warc_record(url, "request", payload=io.BytesIO(b""), length=0,
                                            http_headers=req_headers)
        writer.write_request_response_pair(request, response)
        self._file.flush()
        self.records += 2

    def close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            file.close()

    def __enter__(self) -> WarcWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
